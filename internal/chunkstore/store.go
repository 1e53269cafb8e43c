/*
Copyright 2026 The Playground Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package chunkstore keeps sets of files (a snapshot's directory: sparse
// disk images, a checkpoint, small records) in an S3-compatible bucket as
// content-defined chunks, compressed and encrypted with a key of each
// tenant's own, named by a manifest per snapshot.
//
// In the bucket, under the configured prefix:
//
//	<prefix>/tenants/<tenant ID>/chunks/<name>      a chunk
//	<prefix>/tenants/<tenant ID>/manifests/<id>     a snapshot's manifest
//	<prefix>/tenants/<tenant ID>/locks/<lock>       an upload or prune under way
//
// A chunk's name is the HMAC-SHA256 of its plaintext under a key derived
// from the tenant's, so that a tenant's snapshots share their chunks and
// no two tenants share one, and a name says nothing of what it holds. A
// chunk and a manifest are each compressed (zstd) and sealed (AES-256-GCM
// under a derived key, bound to the chunk's name or the snapshot's ID).
// Whoever reads the bucket without a tenant's key reads none of its files
// (the sizes of its chunks apart); a restore opens every chunk and checks
// its name against its plaintext, and refuses one that does not open or
// match, naming it and the snapshot.
//
// It is in internal/ because both sides use it: an agent uploads and
// restores its node's snapshots, and the manager prunes a tenant's old
// backups without a node.
package chunkstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/restic/chunker"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"
)

// The chunker's bounds: a chunk is cut where the rolling hash says, past
// 64 KiB, one place in 128 Ki on average (so about 192 KiB), and never past
// 1 MiB. They are the format's, not settings: chunks cut otherwise would
// not dedupe with those already stored. Small enough that a file changed
// in one place stores little more than the change (10 versions of a 64 MiB
// file changed 1% each time take 1.14 times one copy; with 256 KiB on
// average, 1.19); large enough that a GiB is about 5,500 objects.
const (
	minChunk    = 64 << 10
	maxChunk    = 1 << 20
	averageBits = 17
	maxSealed   = maxChunk + maxChunk/8 + sealOverhead // zstd's worst case is far below
)

// Defaults of Config's bounds.
const (
	DefaultConcurrency      = 4
	DefaultBytesPerSecond   = 100 << 20
	DefaultMaxManifestBytes = 64 << 20
	DefaultLockStale        = 10 * time.Minute
	DefaultLockPoll         = time.Second
)

// Config is where the store is and how much of the node it may use.
type Config struct {
	// Endpoint is the S3 server's host:port; Secure says to speak HTTPS.
	Endpoint string
	Secure   bool
	// Region, when the server wants one named.
	Region string
	// Bucket and Prefix are where the store's objects are: Prefix (no
	// leading or trailing slash; empty for the bucket's root) lets an
	// installation share a bucket.
	Bucket string
	Prefix string
	// AccessKey and SecretKey are the credentials.
	AccessKey, SecretKey string
	// Transport, when set, is the HTTP transport (with the installation's
	// CA, say).
	Transport http.RoundTripper

	// Concurrency is how many chunks the store compresses, seals and
	// sends (or fetches, opens and writes) at once, all its calls
	// together: the bound of the CPU it takes (and of each call's memory,
	// about 3 MiB a chunk), besides the one reader per upload that cuts and
	// names chunks. A node keeps one store. 0 means DefaultConcurrency.
	Concurrency int
	// BytesPerSecond bounds what the store sends and fetches, together,
	// in bytes a second (sealed bytes, as on the wire). 0 means
	// DefaultBytesPerSecond.
	BytesPerSecond int64
	// MaxManifestBytes bounds a manifest read back (about 90 bytes a
	// chunk: the default holds a snapshot of about 180 GiB). 0 means
	// DefaultMaxManifestBytes.
	MaxManifestBytes int64
	// LockStale is how long an upload's lock, not refreshed, keeps a prune
	// from sweeping: an upload refreshes its lock every quarter of it, and
	// fails rather than write its manifest when it could not for half of
	// it. 0 means DefaultLockStale.
	LockStale time.Duration
	// LockPoll is how often an upload that found a prune under way looks
	// again. 0 means DefaultLockPoll.
	LockPoll time.Duration
}

// Store is a chunk store in one bucket.
type Store struct {
	cfg     Config
	client  *minio.Client
	limiter *rate.Limiter
	enc     *zstd.Encoder
	dec     *zstd.Decoder
	bufs    sync.Pool
	// slots bound the chunks in work across the store's calls: each call
	// also runs at most Concurrency workers, so that its buffers are
	// bounded while it waits for a slot.
	slots chan struct{}
}

// ErrNotFound is returned for a snapshot the store does not hold.
var ErrNotFound = errors.New("no such snapshot in the store")

// ErrCorrupt is returned when an object of the store does not open under
// the tenant's key, or a chunk's contents do not match its name (it was
// changed in the bucket, or is another tenant's), or a chunk a manifest
// names is missing: the snapshot cannot be restored whole.
var ErrCorrupt = errors.New("corrupted or foreign object")

// New returns the store that cfg describes. It does not reach the server.
func New(cfg Config) (*Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("chunkstore: an endpoint and a bucket are required")
	}
	if strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("chunkstore: prefix %q starts or ends with a slash: name it without", cfg.Prefix)
	}
	if cfg.Concurrency < 0 || cfg.BytesPerSecond < 0 || cfg.MaxManifestBytes < 0 || cfg.LockStale < 0 || cfg.LockPoll < 0 {
		return nil, errors.New("chunkstore: a bound is negative: use 0 for its default")
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	def(&cfg.BytesPerSecond, DefaultBytesPerSecond)
	def(&cfg.MaxManifestBytes, DefaultMaxManifestBytes)
	def((*int64)(&cfg.LockStale), int64(DefaultLockStale))
	def((*int64)(&cfg.LockPoll), int64(DefaultLockPoll))
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.Secure,
		Region:    cfg.Region,
		Transport: cfg.Transport,
	})
	if err != nil {
		return nil, fmt.Errorf("chunkstore: %w", err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(cfg.Concurrency), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(cfg.Concurrency), zstd.WithDecoderMaxMemory(uint64(max(maxChunk, cfg.MaxManifestBytes))))
	if err != nil {
		return nil, err
	}
	s := &Store{
		cfg:    cfg,
		client: client,
		// The burst holds the largest object the store sends but a
		// manifest, which waits in pieces.
		limiter: rate.NewLimiter(rate.Limit(cfg.BytesPerSecond), maxSealed),
		enc:     enc,
		dec:     dec,
		slots:   make(chan struct{}, cfg.Concurrency),
	}
	s.bufs.New = func() any { b := make([]byte, maxChunk); return &b }
	return s, nil
}

// slot waits for one of the store's Concurrency slots; release gives it
// back.
func (s *Store) slot(ctx context.Context) (release func(), err error) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close releases the store's compressors.
func (s *Store) Close() {
	_ = s.enc.Close()
	s.dec.Close()
}

func (s *Store) tenantDir(k *keys) string {
	if s.cfg.Prefix == "" {
		return "tenants/" + k.id
	}
	return s.cfg.Prefix + "/tenants/" + k.id
}

func (s *Store) chunkObject(k *keys, name string) string { return s.tenantDir(k) + "/chunks/" + name }

func (s *Store) manifestObject(k *keys, id string) string { return s.tenantDir(k) + "/manifests/" + id }

// wait takes n bytes from the bandwidth bound, in pieces the burst holds.
func (s *Store) wait(ctx context.Context, n int) error {
	for n > 0 {
		step := min(n, s.limiter.Burst())
		if err := s.limiter.WaitN(ctx, step); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

func checkSnapshotID(id string) error {
	if !tenantIDPattern.MatchString(id) {
		return fmt.Errorf("chunkstore: snapshot ID %q is not 1 to 63 lower-case letters, digits and dashes", id)
	}
	return nil
}

// PutStats says what an upload did.
type PutStats struct {
	Files int
	// Chunks is how many distinct chunks the snapshot refers to; Sent how
	// many of them were sent (the others were in the bucket already, from
	// another snapshot of the tenant or an interrupted upload of this one).
	Chunks, Sent int
	// BytesRead is what was read of the files (holes apart); BytesSent is
	// what was sent of chunks, compressed and sealed.
	BytesRead, BytesSent int64
}

// Put stores directory dir as snapshot id of tenant t: its regular files
// and directories (anything else is refused), their permissions, sizes and
// contents, holes kept as holes. Chunks already in the bucket are not sent
// again, so a Put interrupted and called again sends only what is missing.
// The manifest is written last: a snapshot is in the store once whole.
func (s *Store) Put(ctx context.Context, t Tenant, id, dir string) (PutStats, error) {
	var st PutStats
	k, err := deriveKeys(t)
	if err != nil {
		return st, err
	}
	if err := checkSnapshotID(id); err != nil {
		return st, err
	}
	lock, err := s.lockUpload(ctx, k)
	if err != nil {
		return st, fmt.Errorf("chunkstore: snapshot %s: %w", id, err)
	}
	defer lock.release()

	m := Manifest{Version: manifestVersion, Snapshot: id}
	var (
		sent, bytesSent atomic.Int64
		seen            = map[string]bool{} // the producer's alone
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.Concurrency)
	ck := chunker.NewWithBoundaries(nil, k.pol, minChunk, maxChunk)
	send := func(name string, buf *[]byte, data []byte) {
		g.Go(func() error {
			defer s.bufs.Put(buf)
			release, err := s.slot(gctx)
			if err != nil {
				return err
			}
			defer release()
			obj := s.chunkObject(k, name)
			switch _, err := s.client.StatObject(gctx, s.cfg.Bucket, obj, minio.StatObjectOptions{}); {
			case err == nil:
				return nil // stored already
			case minio.ToErrorResponse(err).StatusCode != http.StatusNotFound:
				return fmt.Errorf("looking for chunk %s: %w", name, err)
			}
			sealed := k.seal(s.enc.EncodeAll(data, nil), "chunk "+name)
			if err := s.wait(gctx, len(sealed)); err != nil {
				return err
			}
			if _, err := s.client.PutObject(gctx, s.cfg.Bucket, obj, bytes.NewReader(sealed), int64(len(sealed)),
				minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
				return fmt.Errorf("sending chunk %s: %w", name, err)
			}
			sent.Add(1)
			bytesSent.Add(int64(len(sealed)))
			return nil
		})
	}
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if gctx.Err() != nil {
			return gctx.Err()
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := File{Path: filepath.ToSlash(rel), Mode: info.Mode() & (fs.ModeDir | fs.ModePerm)}
		switch {
		case d.IsDir():
		case info.Mode().IsRegular():
			f.Size = info.Size()
			if f.Extents, err = s.chunkFile(gctx, k, ck, p, f.Size, &st, func(name string, buf *[]byte, data []byte) {
				dup := seen[name]
				seen[name] = true
				if dup {
					s.bufs.Put(buf)
					return
				}
				st.Chunks++
				send(name, buf, data)
			}); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is a %v: a snapshot holds regular files and directories only", p, info.Mode().Type())
		}
		m.Files = append(m.Files, f)
		st.Files++
		return nil
	})
	if err := g.Wait(); err != nil {
		return st, fmt.Errorf("chunkstore: snapshot %s: %w", id, err)
	}
	st.Sent, st.BytesSent = int(sent.Load()), bytesSent.Load()
	if walkErr != nil {
		return st, fmt.Errorf("chunkstore: snapshot %s: %w", id, walkErr)
	}
	if err := lock.check(); err != nil {
		return st, fmt.Errorf("chunkstore: snapshot %s: %w", id, err)
	}
	plain, err := json.Marshal(m)
	if err != nil {
		return st, err
	}
	obj := s.manifestObject(k, id)
	sealed := k.seal(s.enc.EncodeAll(plain, nil), "manifest "+id)
	if err := s.wait(ctx, len(sealed)); err != nil {
		return st, err
	}
	if _, err := s.client.PutObject(ctx, s.cfg.Bucket, obj, bytes.NewReader(sealed), int64(len(sealed)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
		return st, fmt.Errorf("chunkstore: snapshot %s: sending its manifest: %w", id, err)
	}
	return st, nil
}

// chunkFile cuts file p's data into chunks, hands each to emit (which
// owns buf from then), and returns its extents.
func (s *Store) chunkFile(ctx context.Context, k *keys, ck *chunker.Chunker, p string, size int64, st *PutStats,
	emit func(name string, buf *[]byte, data []byte)) ([]Extent, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runs, err := dataExtents(f, size)
	if err != nil {
		return nil, err
	}
	var out []Extent
	for _, r := range runs {
		e := Extent{Offset: r[0]}
		ck.ResetWithBoundaries(io.NewSectionReader(f, r[0], r[1]-r[0]), k.pol, minChunk, maxChunk)
		ck.SetAverageBits(averageBits)
		for {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			buf := s.bufs.Get().(*[]byte)
			c, err := ck.Next(*buf)
			if errors.Is(err, io.EOF) {
				s.bufs.Put(buf)
				break
			}
			if err != nil {
				s.bufs.Put(buf)
				return nil, fmt.Errorf("reading %s: %w", p, err)
			}
			name := k.chunkName(c.Data)
			e.Chunks = append(e.Chunks, ChunkRef{Name: name, Size: int64(c.Length)})
			st.BytesRead += int64(c.Length)
			emit(name, buf, c.Data)
		}
		if len(e.Chunks) > 0 {
			out = append(out, e)
		}
	}
	return out, nil
}

// GetStats says what a restore did.
type GetStats struct {
	Files         int
	Fetched       int
	BytesFetched  int64
	BytesRestored int64
}

// Get restores snapshot id of tenant t into directory target, which it
// creates (it must not exist). Every chunk is opened under the tenant's
// key and checked against its name; the first that does not fails the
// restore with ErrCorrupt, naming it and the snapshot, and target is
// removed. Files are root's, with the snapshot's permissions.
func (s *Store) Get(ctx context.Context, t Tenant, id, target string) (GetStats, error) {
	var st GetStats
	k, err := deriveKeys(t)
	if err != nil {
		return st, err
	}
	if err := checkSnapshotID(id); err != nil {
		return st, err
	}
	m, err := s.manifest(ctx, k, id)
	if err != nil {
		return st, err
	}
	if err := os.Mkdir(target, 0o700); err != nil {
		return st, fmt.Errorf("chunkstore: restoring snapshot %s: %w", id, err)
	}
	st, err = s.restore(ctx, k, m, target)
	if err != nil {
		_ = os.RemoveAll(target)
		return st, fmt.Errorf("chunkstore: restoring snapshot %s: %w", id, err)
	}
	return st, nil
}

// manifest reads and opens snapshot id's manifest.
func (s *Store) manifest(ctx context.Context, k *keys, id string) (*Manifest, error) {
	obj := s.manifestObject(k, id)
	sealed, err := s.fetch(ctx, obj, s.cfg.MaxManifestBytes+sealOverhead)
	if err != nil {
		if minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("chunkstore: snapshot %s of tenant %s: %w", id, k.id, ErrNotFound)
		}
		return nil, fmt.Errorf("chunkstore: snapshot %s: reading its manifest: %w", id, err)
	}
	plain, err := k.open(sealed, "manifest "+id)
	if err == nil {
		plain, err = s.dec.DecodeAll(plain, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("chunkstore: snapshot %s: manifest %s: %w: %w", id, obj, ErrCorrupt, err)
	}
	var m Manifest
	if err := json.Unmarshal(plain, &m); err != nil {
		return nil, fmt.Errorf("chunkstore: snapshot %s: manifest %s: %w", id, obj, err)
	}
	if err := m.validate(id, maxChunk); err != nil {
		return nil, fmt.Errorf("chunkstore: snapshot %s: manifest %s: %w", id, obj, err)
	}
	return &m, nil
}

// fetch reads object obj whole, refusing one larger than limit.
func (s *Store) fetch(ctx context.Context, obj string, limit int64) ([]byte, error) {
	o, err := s.client.GetObject(ctx, s.cfg.Bucket, obj, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer o.Close()
	data, err := io.ReadAll(io.LimitReader(o, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("object %s is larger than %d bytes", obj, limit)
	}
	return data, s.wait(ctx, len(data))
}

func (s *Store) restore(ctx context.Context, k *keys, m *Manifest, target string) (GetStats, error) {
	var st GetStats
	var zero sync.Map // names of chunks found all zeros: left as holes
	for _, mf := range m.Files {
		p := filepath.Join(target, filepath.FromSlash(mf.Path))
		if mf.Mode.IsDir() {
			if err := os.Mkdir(p, 0o700); err != nil {
				return st, err
			}
			continue
		}
		if err := s.restoreFile(ctx, k, mf, p, &zero, &st); err != nil {
			return st, err
		}
		st.Files++
	}
	// Permissions last, deepest first: a directory without write
	// permission is filled before it gets its mode.
	for i := len(m.Files) - 1; i >= 0; i-- {
		mf := m.Files[i]
		if err := os.Chmod(filepath.Join(target, filepath.FromSlash(mf.Path)), mf.Mode.Perm()); err != nil {
			return st, err
		}
	}
	return st, nil
}

// restoreFile writes file mf at p from its chunks, fetched Concurrency at
// a time, each verified.
func (s *Store) restoreFile(ctx context.Context, k *keys, mf File, p string, zero *sync.Map, st *GetStats) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(mf.Size); err != nil {
		return err
	}
	var fetched, got, restored atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.cfg.Concurrency)
	for _, e := range mf.Extents {
		off := e.Offset
		for _, c := range e.Chunks {
			at := off
			off += c.Size
			if _, ok := zero.Load(c.Name); ok {
				continue
			}
			if gctx.Err() != nil {
				break
			}
			g.Go(func() error {
				release, err := s.slot(gctx)
				if err != nil {
					return err
				}
				defer release()
				obj := s.chunkObject(k, c.Name)
				sealed, err := s.fetch(gctx, obj, maxSealed)
				if minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
					return fmt.Errorf("chunk %s (%s): %w: it is missing from the store", c.Name, obj, ErrCorrupt)
				}
				if err != nil {
					return fmt.Errorf("fetching chunk %s: %w", c.Name, err)
				}
				fetched.Add(1)
				got.Add(int64(len(sealed)))
				plain, err := k.open(sealed, "chunk "+c.Name)
				if err != nil {
					return fmt.Errorf("chunk %s (%s): %w: %w", c.Name, obj, ErrCorrupt, err)
				}
				data, err := s.dec.DecodeAll(plain, nil)
				if err != nil {
					return fmt.Errorf("chunk %s (%s): %w: it does not decompress: %w", c.Name, obj, ErrCorrupt, err)
				}
				if int64(len(data)) != c.Size || k.chunkName(data) != c.Name {
					return fmt.Errorf("chunk %s (%s): %w: its contents are not what its name says", c.Name, obj, ErrCorrupt)
				}
				if isZero(data) {
					zero.Store(c.Name, true)
					return nil
				}
				if _, err := f.WriteAt(data, at); err != nil {
					return err
				}
				restored.Add(c.Size)
				return nil
			})
		}
	}
	err = g.Wait()
	st.Fetched += int(fetched.Load())
	st.BytesFetched += got.Load()
	st.BytesRestored += restored.Load()
	if err != nil {
		return err
	}
	return f.Sync()
}

// List is the IDs of tenant t's snapshots in the store.
func (s *Store) List(ctx context.Context, t Tenant) ([]string, error) {
	k, err := deriveKeys(t)
	if err != nil {
		return nil, err
	}
	return s.list(ctx, s.tenantDir(k)+"/manifests/")
}

// list is the names of the objects under prefix, the prefix cut.
func (s *Store) list(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	for o := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return nil, fmt.Errorf("chunkstore: listing %s: %w", prefix, o.Err)
		}
		out = append(out, path.Base(strings.TrimPrefix(o.Key, prefix)))
	}
	return out, nil
}
