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

package chunkstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/playground-dev/playground/internal/chunkstore"
	"github.com/playground-dev/playground/internal/s3test"
)

const prefix = "pg"

func newStore(t *testing.T, srv *s3test.Server, tune func(*chunkstore.Config)) *chunkstore.Store {
	t.Helper()
	cfg := chunkstore.Config{
		Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: prefix,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		BytesPerSecond: 1 << 30,
	}
	if tune != nil {
		tune(&cfg)
	}
	s, err := chunkstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func tenant(id string) chunkstore.Tenant { return chunkstore.Tenant{ID: id, Key: chunkstore.NewKey()} }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func write(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// snapshotDir is a directory like a gVisor sandbox's snapshot: a sparse
// layer image, a checkpoint directory, a small record.
func snapshotDir(t *testing.T, marker string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	write(t, filepath.Join(dir, "snapshot.json"), []byte(`{"source":"`+marker+`"}`), 0o600)
	write(t, filepath.Join(dir, "checkpoint", "checkpoint.img"), randomBytes(300<<10), 0o640)
	write(t, filepath.Join(dir, "checkpoint", "pages-meta.img"), nil, 0o644)
	write(t, filepath.Join(dir, "checkpoint", "notes"), []byte(strings.Repeat(marker+"\n", 3)), 0o444)
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o500); err != nil {
		t.Fatal(err)
	}
	img, err := os.Create(filepath.Join(dir, "layer.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if err := img.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		at   int64
		data []byte
	}{{0, randomBytes(1 << 20)}, {100 << 20, randomBytes(100 << 10)}, {200 << 20, []byte("the marker in the image: " + marker)}, {256<<20 - 3, []byte("end")}} {
		if _, err := img.WriteAt(w.data, w.at); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tree is every file under dir: its mode and contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil // the caller's: a restore makes it 0700
		}
		v := info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %d %x", len(b), sha256.Sum256(b))
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalTrees(t *testing.T, want, got string) {
	t.Helper()
	w, g := tree(t, want), tree(t, got)
	for p, v := range w {
		if g[p] != v {
			t.Errorf("%s differs after the round trip (%q against %q)", p, g[p], v)
		}
	}
	for p := range g {
		if _, ok := w[p]; !ok {
			t.Errorf("%s was restored but is not in the snapshot", p)
		}
	}
}

func TestRoundTripKeepsBytesModesAndHoles(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	a := tenant("tenant-a")
	src := snapshotDir(t, "round-trip")
	ctx := context.Background()
	put, err := s.Put(ctx, a, "snap-1", src)
	if err != nil {
		t.Fatal(err)
	}
	if put.BytesRead > 8<<20 {
		t.Errorf("the upload read %d bytes of a 256 MiB image with about 1 MiB of data: it read holes", put.BytesRead)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := s.Get(ctx, a, "snap-1", dst); err != nil {
		t.Fatal(err)
	}
	equalTrees(t, src, dst)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dst, "layer.img"), &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 16<<20 {
		t.Errorf("the restored 256 MiB image takes %d bytes on disk: its holes were filled", used)
	}
	if ids, err := s.List(ctx, a); err != nil || len(ids) != 1 || ids[0] != "snap-1" {
		t.Errorf("List = %v, %v; want [snap-1]", ids, err)
	}
}

// chunkBytes is what tenant id's chunks take in the bucket.
func chunkBytes(t *testing.T, srv *s3test.Server, id string) (n int, total int64) {
	t.Helper()
	for _, b := range srv.Objects(t, prefix+"/tenants/"+id+"/chunks/") {
		n++
		total += int64(len(b))
	}
	return n, total
}

func TestTenVersionsChangedOnePercentStoreLittleMoreThanOne(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	// A fixed key and seeded data: where chunks are cut is the same each
	// run, and so is the ratio.
	a := chunkstore.Tenant{ID: "tenant-a", Key: bytes.Repeat([]byte{7}, chunkstore.KeySize)}
	dir := t.TempDir()
	const size = 64 << 20
	src := mrand.NewChaCha8([32]byte{1})
	rng := mrand.New(src)
	seeded := func(n int) []byte {
		b := make([]byte, n)
		_, _ = src.Read(b)
		return b
	}
	data := seeded(size)
	ctx := context.Background()
	for v := range 10 {
		if v > 0 {
			// 1% of the file rewritten, at one place.
			n := size / 100
			at := rng.IntN(size - n)
			copy(data[at:], seeded(n))
		}
		write(t, filepath.Join(dir, "layer.img"), data, 0o600)
		if _, err := s.Put(ctx, a, fmt.Sprintf("v%d", v), dir); err != nil {
			t.Fatal(err)
		}
	}
	chunks, stored := chunkBytes(t, srv, "tenant-a")
	ratio := float64(stored) / size
	t.Logf("10 versions of a 64 MiB file, 1%% changed between each: %d chunks, %d bytes stored, %.3f times one copy", chunks, stored, ratio)
	fmt.Printf("chunkstore: 10 versions, 1%% changed each: %.3f× one copy\n", ratio)
	if ratio > 1.2 {
		t.Errorf("10 versions take %.3f times one copy; want at most 1.2", ratio)
	}
	// And the last is whole.
	dst := filepath.Join(t.TempDir(), "v9")
	if _, err := s.Get(ctx, a, "v9", dst); err != nil {
		t.Fatal(err)
	}
	equalTrees(t, dir, dst)
}

func TestInterruptedUploadResumesWithMissingChunksOnly(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, func(c *chunkstore.Config) { c.Concurrency = 2 })
	a := tenant("tenant-a")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "layer.img"), randomBytes(32<<20), 0o600)
	chunkPrefix := prefix + "/tenants/tenant-a/chunks/"

	// The first upload is cut off after 40 chunks are sent.
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	srv.OnRequest(func(r *http.Request) {
		if r.Method == http.MethodPut && srv.Requests(http.MethodPut, chunkPrefix) >= 40 {
			once.Do(cancel)
		}
	})
	if _, err := s.Put(ctx, a, "snap-1", dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("the interrupted upload returned %v, want context.Canceled", err)
	}
	srv.OnRequest(nil)
	if ids, _ := s.List(context.Background(), a); len(ids) != 0 {
		t.Fatalf("an interrupted upload left a manifest: %v", ids)
	}
	stored, _ := chunkBytes(t, srv, "tenant-a")

	before := srv.Requests(http.MethodPut, chunkPrefix)
	st, err := s.Put(context.Background(), a, "snap-1", dir)
	if err != nil {
		t.Fatal(err)
	}
	again := srv.Requests(http.MethodPut, chunkPrefix) - before
	t.Logf("%d chunks; %d stored before the interruption; %d sent on resuming", st.Chunks, stored, again)
	if stored == 0 || stored >= st.Chunks {
		t.Fatalf("the interruption left %d of %d chunks: the test cut nothing", stored, st.Chunks)
	}
	// What was stored when the upload was cut is not sent again; a chunk
	// whose PUT was under way (2 at most) may have landed after the
	// listing, and is not sent again either.
	if missing := st.Chunks - stored; again > missing || again < missing-2 || st.Sent != again {
		t.Errorf("the resumed upload sent %d chunks (it says %d); %d were missing", again, st.Sent, missing)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := s.Get(context.Background(), a, "snap-1", dst); err != nil {
		t.Fatal(err)
	}
	equalTrees(t, dir, dst)
}

func TestCorruptedOrForeignChunkIsRefusedNamingIt(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	a, b := tenant("tenant-a"), tenant("tenant-b")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "layer.img"), randomBytes(4<<20), 0o600)
	ctx := context.Background()
	if _, err := s.Put(ctx, a, "snap-a", dir); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	write(t, filepath.Join(other, "f"), randomBytes(100<<10), 0o600)
	if _, err := s.Put(ctx, b, "snap-b", other); err != nil {
		t.Fatal(err)
	}
	var victim string
	for k := range srv.Objects(t, prefix+"/tenants/tenant-a/chunks/") {
		victim = k
		break
	}
	name := filepath.Base(victim)
	var foreign []byte
	for _, v := range srv.Objects(t, prefix+"/tenants/tenant-b/chunks/") {
		foreign = v
	}
	orig := srv.Get(t, victim)
	flipped := bytes.Clone(orig)
	flipped[len(flipped)/2] ^= 1

	for _, c := range []struct {
		what string
		data []byte
	}{{"a byte changed", flipped}, {"another tenant's chunk", foreign}, {"truncated", orig[:10]}, {"missing", nil}} {
		t.Run(c.what, func(t *testing.T) {
			if c.data == nil {
				if err := srv.Client.RemoveObject(ctx, srv.Bucket, victim, minio.RemoveObjectOptions{}); err != nil {
					t.Fatal(err)
				}
			} else {
				srv.Put(t, victim, c.data)
			}
			dst := filepath.Join(t.TempDir(), "restored")
			_, err := s.Get(ctx, a, "snap-a", dst)
			if !errors.Is(err, chunkstore.ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "snap-a") {
				t.Fatalf("restoring over a chunk %s returned %v; want ErrCorrupt naming chunk %s and snapshot snap-a", c.what, err, name)
			}
			if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused restore left its target: %v", err)
			}
		})
	}
}

func TestAnotherTenantsKeyCannotRestore(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	a, b := tenant("tenant-a"), tenant("tenant-b")
	dir := snapshotDir(t, "tenant a's")
	ctx := context.Background()
	if _, err := s.Put(ctx, a, "snap-a", dir); err != nil {
		t.Fatal(err)
	}
	// B's key on A's directory: nothing opens.
	_, err := s.Get(ctx, chunkstore.Tenant{ID: a.ID, Key: b.Key}, "snap-a", filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, chunkstore.ErrCorrupt) || !strings.Contains(err.Error(), "snap-a") {
		t.Errorf("restoring A's snapshot with B's key returned %v; want ErrCorrupt naming the snapshot", err)
	}
	// B asking for A's snapshot by its ID: B has none.
	if _, err := s.Get(ctx, b, "snap-a", filepath.Join(t.TempDir(), "y")); !errors.Is(err, chunkstore.ErrNotFound) {
		t.Errorf("B asking for snap-a returned %v; want ErrNotFound", err)
	}
	// A's manifest and chunks copied into B's directory: they do not open
	// under B's key.
	for k, v := range srv.Objects(t, prefix+"/tenants/tenant-a/") {
		srv.Put(t, strings.Replace(k, "/tenant-a/", "/tenant-b/", 1), v)
	}
	if _, err := s.Get(ctx, b, "snap-a", filepath.Join(t.TempDir(), "z")); !errors.Is(err, chunkstore.ErrCorrupt) {
		t.Errorf("restoring A's objects copied into B's directory returned %v; want ErrCorrupt", err)
	}
}

func TestBucketHoldsNoPlaintext(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	marker := "MARKER-" + fmt.Sprintf("%x", randomBytes(8))
	dir := snapshotDir(t, marker)
	write(t, filepath.Join(dir, marker+".txt"), []byte(marker), 0o600)
	if _, err := s.Put(context.Background(), tenant("tenant-a"), "snap-1", dir); err != nil {
		t.Fatal(err)
	}
	objects := srv.Objects(t, "")
	if len(objects) < 3 {
		t.Fatalf("the bucket holds %d objects", len(objects))
	}
	for k, v := range objects {
		if strings.Contains(k, marker) || bytes.Contains(v, []byte(marker)) {
			t.Errorf("object %s holds the marker in plaintext", k)
		}
	}
}

func TestPruneKeepsWhatRemainingManifestsName(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	a := tenant("tenant-a")
	ctx := context.Background()
	common := randomBytes(2 << 20)
	one, two := t.TempDir(), t.TempDir()
	write(t, filepath.Join(one, "common"), common, 0o600)
	write(t, filepath.Join(one, "own"), randomBytes(2<<20), 0o600)
	write(t, filepath.Join(two, "common"), common, 0o600)
	write(t, filepath.Join(two, "own"), randomBytes(2<<20), 0o600)
	if _, err := s.Put(ctx, a, "one", one); err != nil {
		t.Fatal(err)
	}
	st2, err := s.Put(ctx, a, "two", two)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := chunkBytes(t, srv, "tenant-a")
	pr, err := s.Delete(ctx, a, "one")
	if err != nil {
		t.Fatal(err)
	}
	left, _ := chunkBytes(t, srv, "tenant-a")
	if pr.Deferred || pr.Removed == 0 || left != st2.Chunks || pr.Removed != all-left {
		t.Errorf("deleting one of two snapshots: %+v, %d of %d chunks left; want the %d that two names", pr, left, all, st2.Chunks)
	}
	dst := filepath.Join(t.TempDir(), "two")
	if _, err := s.Get(ctx, a, "two", dst); err != nil {
		t.Fatalf("the remaining snapshot does not restore: %v", err)
	}
	equalTrees(t, two, dst)
	if _, err := s.Delete(ctx, a, "two"); err != nil {
		t.Fatal(err)
	}
	if left, _ := chunkBytes(t, srv, "tenant-a"); left != 0 {
		t.Errorf("%d chunks left with no snapshot", left)
	}
}

func TestPruneRacingAnUploadRemovesNothingItNeeds(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	a := tenant("tenant-a")
	ctx := context.Background()
	base := randomBytes(4 << 20)
	one, two := t.TempDir(), t.TempDir()
	write(t, filepath.Join(one, "f"), base, 0o600)
	write(t, filepath.Join(two, "f"), base, 0o600) // the same chunks, found stored
	write(t, filepath.Join(two, "g"), randomBytes(1<<20), 0o600)
	if _, err := s.Put(ctx, a, "one", one); err != nil {
		t.Fatal(err)
	}

	// Upload two, held before its manifest is written.
	held, release := make(chan struct{}), make(chan struct{})
	srv.OnRequest(func(r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/two") {
			close(held)
			<-release
		}
	})
	done := make(chan error, 1)
	go func() { _, err := s.Put(ctx, a, "two", two); done <- err }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the upload ended before its manifest: %v", err)
	}
	// Deleting one now must keep the chunks two counts on.
	pr, err := s.Delete(ctx, a, "one")
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	srv.OnRequest(nil)
	if !pr.Deferred || pr.Removed != 0 {
		t.Errorf("a prune during an upload: %+v; want it deferred, nothing removed", pr)
	}
	dst := filepath.Join(t.TempDir(), "two")
	if _, err := s.Get(ctx, a, "two", dst); err != nil {
		t.Fatalf("the upload that raced a prune does not restore: %v", err)
	}
	equalTrees(t, two, dst)
	// The next prune sweeps nothing two needs either.
	if pr, err := s.Prune(ctx, a); err != nil || pr.Deferred || pr.Removed != 0 {
		t.Errorf("prune after the upload: %+v, %v", pr, err)
	}
}

func TestUploadWaitsForAPruneUnderWay(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, func(c *chunkstore.Config) { c.LockPoll = 20 * time.Millisecond })
	a := tenant("tenant-a")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "f"), randomBytes(1<<20), 0o600)
	lock := prefix + "/tenants/tenant-a/locks/prune-test"
	srv.Put(t, lock, []byte("lock\n")) // a prune under way
	locks := prefix + "/tenants/tenant-a/locks/"
	polled := make(chan struct{})
	var once sync.Once
	srv.OnRequest(func(r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.RawQuery, "prefix="+strings.ReplaceAll(locks, "/", "%2F")) &&
			srv.Requests(http.MethodGet, "") >= 3 {
			once.Do(func() { close(polled) })
		}
	})
	done := make(chan error, 1)
	go func() { _, err := s.Put(context.Background(), a, "snap", dir); done <- err }()
	select {
	case <-polled:
	case err := <-done:
		t.Fatalf("the upload went on while a prune held its lock: %v", err)
	}
	if n := srv.Requests(http.MethodPut, prefix+"/tenants/tenant-a/chunks/"); n != 0 {
		t.Errorf("the upload sent %d chunks while a prune held its lock", n)
	}
	if err := srv.Client.RemoveObject(context.Background(), srv.Bucket, lock, minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBounds(t *testing.T) {
	srv := s3test.Start(t)
	a := tenant("tenant-a")
	dir := t.TempDir()
	write(t, filepath.Join(dir, "f"), randomBytes(6<<20), 0o600)
	ctx := context.Background()

	t.Run("bandwidth", func(t *testing.T) {
		s := newStore(t, srv, func(c *chunkstore.Config) { c.BytesPerSecond = 2 << 20 })
		start := time.Now()
		st, err := s.Put(ctx, a, "slow", dir)
		if err != nil {
			t.Fatal(err)
		}
		// What was sent past the burst (one chunk) took its time.
		want := time.Duration(float64(st.BytesSent-(2<<20)) / float64(2<<20) * float64(time.Second))
		if took := time.Since(start); took < want {
			t.Errorf("%d bytes sent at 2 MiB/s took %v; want at least %v", st.BytesSent, took, want)
		}
	})
	t.Run("concurrency", func(t *testing.T) {
		srv := s3test.Start(t)
		s := newStore(t, srv, func(c *chunkstore.Config) { c.Concurrency = 2 })
		r := tenant("tenant-r")
		if _, err := s.Put(ctx, r, "r", dir); err != nil {
			t.Fatal(err)
		}
		// Two uploads and a restore at once share the store's 2 (its
		// locks and manifests are apart).
		srv.WatchInFlight("/chunks/")
		errs := make(chan error, 3)
		go func() { _, err := s.Put(ctx, tenant("tenant-c"), "c", dir); errs <- err }()
		go func() { _, err := s.Put(ctx, tenant("tenant-d"), "d", dir); errs <- err }()
		go func() { _, err := s.Get(ctx, r, "r", filepath.Join(t.TempDir(), "r")); errs <- err }()
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if n := srv.MaxInFlight("/chunks/"); n > 2 || n == 0 {
			t.Errorf("%d chunk requests at once with Concurrency 2", n)
		}
	})
	t.Run("manifest size", func(t *testing.T) {
		s := newStore(t, srv, func(c *chunkstore.Config) { c.MaxManifestBytes = 64 })
		big := t.TempDir()
		for i := range 20 {
			write(t, filepath.Join(big, fmt.Sprintf("file-%02d", i)), []byte{byte(i)}, 0o600)
		}
		if _, err := s.Put(ctx, a, "big", big); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, a, "big", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Errorf("a manifest past MaxManifestBytes was read: %v", err)
		}
	})
	t.Run("bad configuration", func(t *testing.T) {
		for _, c := range []chunkstore.Config{
			{Bucket: "b"},
			{Endpoint: "e:1", Bucket: "b", Prefix: "/p"},
			{Endpoint: "e:1", Bucket: "b", Concurrency: -1},
		} {
			if _, err := chunkstore.New(c); err == nil {
				t.Errorf("New(%+v) took it", c)
			}
		}
		s := newStore(t, srv, nil)
		if _, err := s.Put(ctx, chunkstore.Tenant{ID: "Tenant/A", Key: chunkstore.NewKey()}, "x", dir); err == nil {
			t.Error("a tenant ID with a slash was taken")
		}
		if _, err := s.Put(ctx, chunkstore.Tenant{ID: "t", Key: []byte("short")}, "x", dir); err == nil {
			t.Error("a short key was taken")
		}
		link := t.TempDir()
		if err := os.Symlink("/etc/passwd", filepath.Join(link, "l")); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, a, "link", link); err == nil || !strings.Contains(err.Error(), "regular files and directories only") {
			t.Errorf("a snapshot with a symbolic link: %v", err)
		}
	})
}

func TestUploadThatLostItsLockFailsRatherThanNameSweptChunks(t *testing.T) {
	srv := s3test.Start(t)
	s := newStore(t, srv, nil)
	// For the stalled upload and the prune, a lock goes stale after 2 s
	// (the server's clock counts in seconds).
	short := newStore(t, srv, func(c *chunkstore.Config) { c.LockStale = 2 * time.Second })
	a := tenant("tenant-a")
	ctx := context.Background()
	base := randomBytes(2 << 20)
	one, two := t.TempDir(), t.TempDir()
	write(t, filepath.Join(one, "f"), base, 0o600)
	write(t, filepath.Join(two, "f"), base, 0o600)
	write(t, filepath.Join(two, "g"), randomBytes(256<<10), 0o600)
	if _, err := s.Put(ctx, a, "one", one); err != nil {
		t.Fatal(err)
	}
	// Upload two stalls (a node frozen, say): its new chunks and its
	// lock's refreshes are held.
	release, stalled := make(chan struct{}), make(chan struct{})
	var uploadLocks sync.Map
	var once sync.Once
	srv.OnRequest(func(r *http.Request) {
		if r.Method != http.MethodPut {
			return
		}
		if strings.Contains(r.URL.Path, "/locks/upload-") {
			if _, again := uploadLocks.LoadOrStore(r.URL.Path, true); !again {
				return // the lock's first write
			}
			<-release
		}
		if strings.Contains(r.URL.Path, "/chunks/") {
			once.Do(func() { close(stalled) })
			<-release
		}
	})
	done := make(chan error, 1)
	go func() { _, err := short.Put(ctx, a, "two", two); done <- err }()
	select {
	case <-stalled: // it holds its lock, and counts on one's chunks
	case err := <-done:
		t.Fatalf("the upload ended before it stalled: %v", err)
	}
	// A prune is held off until the stalled upload's lock is stale, then
	// sweeps one's chunks, which two counted on.
	for {
		pr, err := short.Delete(ctx, a, "one")
		if err != nil {
			t.Fatal(err)
		}
		if !pr.Deferred {
			if pr.Removed == 0 {
				t.Fatalf("the prune removed nothing: %+v", pr)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "could not refresh its lock") {
		t.Fatalf("an upload whose lock went stale wrote its manifest: %v", err)
	}
	srv.OnRequest(nil)
	if ids, _ := s.List(ctx, a); len(ids) != 0 {
		t.Fatalf("snapshots %v in the store; want none", ids)
	}
	// Put again, it sends what is missing and restores.
	if _, err := s.Put(ctx, a, "two", two); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "two")
	if _, err := s.Get(ctx, a, "two", dst); err != nil {
		t.Fatal(err)
	}
	equalTrees(t, two, dst)
}

// BenchmarkThroughput compares the store's upload and restore of a 64 MiB
// file (chunked, compressed, sealed, verified) with a plain PutObject and
// GetObject of the same bytes to the same server.
func BenchmarkThroughput(b *testing.B) {
	srv := s3test.Start(b)
	cfg := chunkstore.Config{
		Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: prefix,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, BytesPerSecond: 1 << 40,
	}
	s, err := chunkstore.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const size = 64 << 20
	data := randomBytes(size)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "layer.img"), data, 0o600); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("store-put", func(b *testing.B) {
		b.SetBytes(size)
		for i := range b.N {
			// A tenant of its own each time: nothing is stored already.
			if _, err := s.Put(ctx, chunkstore.Tenant{ID: fmt.Sprintf("put-%d", i), Key: chunkstore.NewKey()}, "s", dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	t := chunkstore.Tenant{ID: "get", Key: chunkstore.NewKey()}
	if _, err := s.Put(ctx, t, "s", dir); err != nil {
		b.Fatal(err)
	}
	b.Run("store-get", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			if _, err := s.Get(ctx, t, "s", filepath.Join(b.TempDir(), "r")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-put", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			if _, err := srv.Client.PutObject(ctx, srv.Bucket, "plain", bytes.NewReader(data), size, minio.PutObjectOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("plain-get", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			o, err := srv.Client.GetObject(ctx, srv.Bucket, "plain", minio.GetObjectOptions{})
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Create(filepath.Join(b.TempDir(), "plain"))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.ReadFrom(o); err != nil {
				b.Fatal(err)
			}
			_ = o.Close()
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			_ = f.Close()
		}
	})
}
