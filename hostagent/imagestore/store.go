//go:build linux

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

// Package imagestore keeps the OCI images a node's sandboxes run as their
// system: each layer fetched once from its registry, verified against its
// digest, unpacked once as an overlayfs lower layer and shared by every
// sandbox that runs an image holding it; the disk it takes bounded, the
// least recently used images no sandbox holds removed past the bound; and a
// cached private image used for a tenant only once the registry has said,
// under that tenant's credentials, that it may have it.
//
// On disk, under the store's directory (root's, 0700):
//
//	layers/<hex>/        a layer unpacked (an overlay lower directory),
//	                     named by its compressed digest
//	layers/<hex>.json    its record: diff ID, size, what was neutralised
//	images/<hex>.json    an image (named by its manifest's digest): its
//	                     layers bottom first, its config, its size, the
//	                     references that resolved to it, when last used
//	tmp/                 unpacks under way; emptied when the store opens
package imagestore

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/singleflight"

	"github.com/playground-dev/playground/internal/registrytransport"
)

// Options configure a Store.
type Options struct {
	// Dir is the store's directory; made if missing.
	Dir string
	// MaxBytes bounds the disk the unpacked layers take together. An
	// image that would take the store past it, once every image no
	// sandbox holds is removed, is refused. Default 20 GiB.
	MaxBytes int64
	// MaxLayerBytes bounds what one layer may expand to (and its
	// compressed size): a decompression bomb stops here. Default 4 GiB.
	MaxLayerBytes int64
	// MaxLayerEntries bounds the entries of one layer. Default 1,000,000.
	MaxLayerEntries int
	// MaxLayers bounds the layers of one image (overlayfs stacks at most
	// 500 lower layers, and each costs a mount option). Default 128.
	MaxLayers int
	// CheckTTL is how long the registry's answer that a tenant may pull
	// a private image is trusted before it is asked again. Default 15m.
	CheckTTL time.Duration
	// RootCAs are the CAs a registry's certificate is checked against;
	// nil: the system's.
	RootCAs *x509.CertPool
	// PlainHTTP are the registries reached over cleartext HTTP (host:port,
	// or a host for any port); every other one over HTTPS only, so that no
	// pull credential crosses the network in the clear.
	PlainHTTP []string
	// Remote are further options of every registry request (retries,
	// user agent); the store adds its transport, the context and the
	// credentials.
	Remote []remote.Option
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (o *Options) defaults() {
	o.Remote = append([]remote.Option{remote.WithTransport(registrytransport.New(registrytransport.Options{
		RootCAs: o.RootCAs, PlainHTTP: o.PlainHTTP, Flag: "the agent's plain-HTTP registries",
	}))}, o.Remote...)
	if o.MaxBytes <= 0 {
		o.MaxBytes = 20 << 30
	}
	if o.MaxLayerBytes <= 0 {
		o.MaxLayerBytes = 4 << 30
	}
	if o.MaxLayerEntries <= 0 {
		o.MaxLayerEntries = 1_000_000
	}
	if o.MaxLayers <= 0 {
		o.MaxLayers = 128
	}
	if o.CheckTTL <= 0 {
		o.CheckTTL = 15 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Image is an image in the store, ready to be a sandbox's system.
type Image struct {
	// Digest is its manifest's digest: what a sandbox runs, exactly.
	Digest string `json:"digest"`
	// Layers are its layers' directories, bottom first (overlayfs wants
	// them top first: reverse them for lowerdir).
	Layers []string `json:"-"`
	// LayerDigests are its layers' compressed digests, bottom first.
	LayerDigests []string `json:"layers"`
	// Config is the part of the image's config a sandbox honours.
	Config Config `json:"config"`
	// Bytes is the disk its layers take (shared layers counted whole).
	Bytes int64 `json:"bytes"`
	// Public says it was pulled without credentials: any tenant may use
	// it without asking the registry.
	Public bool `json:"public"`
	// Refs are the references (by digest) that resolved to it: an
	// index's digest, or the manifest's own.
	Refs []string `json:"refs"`
	// Notes are what its layers' unpacking neutralised.
	Notes []string `json:"notes,omitempty"`
}

// Config is what of an image's config a sandbox honours.
type Config struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	User       string   `json:"user,omitempty"`
}

// layerRecord is a layer's record beside its directory.
type layerRecord struct {
	Digest    string   `json:"digest"`
	DiffID    string   `json:"diffID"`
	Bytes     int64    `json:"bytes"`
	Notes     []string `json:"notes,omitempty"`
	MoreNotes int      `json:"moreNotes,omitempty"`
}

// Request asks the store for an image on behalf of a tenant.
type Request struct {
	// Ref is the image by digest: registry/repo@sha256:…, of a manifest
	// or of an index (the node's platform is taken from it).
	Ref string
	// Tenant is whose right to the image is checked.
	Tenant string
	// Keychain holds the tenant's pull credentials; nil pulls and checks
	// anonymously.
	Keychain authn.Keychain
	// Progress, when set, hears the bytes fetched of the bytes to fetch.
	Progress func(done, total int64)
}

// Store is a node's image store. Its methods are safe for concurrent use.
type Store struct {
	opts    Options
	flights singleflight.Group

	mu     sync.Mutex
	images map[string]*Image    // by manifest digest
	refs   map[string]string    // reference digest → manifest digest
	layers map[string]int64     // layer digest → bytes
	held   map[string]int       // manifest digest → holders
	used   map[string]time.Time // manifest digest → last held
	checks map[checkKey]time.Time
}

type checkKey struct{ tenant, digest, creds string }

// Open opens (or makes) the store in opts.Dir, reading back the images and
// layers a previous run kept and removing unpacks it left unfinished.
func Open(opts Options) (*Store, error) {
	opts.defaults()
	s := &Store{
		opts:   opts,
		images: map[string]*Image{},
		refs:   map[string]string{},
		layers: map[string]int64{},
		held:   map[string]int{},
		used:   map[string]time.Time{},
		checks: map[checkKey]time.Time{},
	}
	for _, d := range []string{"", "layers", "images"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("imagestore: %w", err)
		}
	}
	if err := os.RemoveAll(filepath.Join(opts.Dir, "tmp")); err != nil {
		return nil, fmt.Errorf("imagestore: clearing unfinished unpacks: %w", err)
	}
	if err := os.Mkdir(filepath.Join(opts.Dir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("imagestore: %w", err)
	}
	s.load()
	return s, nil
}

func (s *Store) load() {
	// A layer directory whose record is missing was being removed.
	dirs, _ := os.ReadDir(filepath.Join(s.opts.Dir, "layers"))
	for _, d := range dirs {
		if d.IsDir() && !fileExists(filepath.Join(s.opts.Dir, "layers", d.Name()+".json")) {
			_ = os.RemoveAll(filepath.Join(s.opts.Dir, "layers", d.Name()))
		}
	}
	lrs, _ := filepath.Glob(filepath.Join(s.opts.Dir, "layers", "*.json"))
	for _, p := range lrs {
		var r layerRecord
		if err := readJSON(p, &r); err != nil {
			// A record is written after its directory is in place: one
			// that cannot be read is dropped with its layer.
			_ = os.RemoveAll(strings.TrimSuffix(p, ".json"))
			_ = os.Remove(p)
			continue
		}
		s.layers[r.Digest] = r.Bytes
	}
	irs, _ := filepath.Glob(filepath.Join(s.opts.Dir, "images", "*.json"))
	for _, p := range irs {
		var img Image
		if err := readJSON(p, &img); err != nil {
			_ = os.Remove(p)
			continue
		}
		complete := true
		for _, l := range img.LayerDigests {
			if _, ok := s.layers[l]; !ok {
				complete = false
			}
		}
		if !complete {
			_ = os.Remove(p)
			continue
		}
		s.fill(&img)
		s.images[img.Digest] = &img
		for _, r := range img.Refs {
			s.refs[r] = img.Digest
		}
		if fi, err := os.Stat(p); err == nil {
			s.used[img.Digest] = fi.ModTime()
		}
	}
	// Layers no image names (an image removed, or a pull that stopped
	// between its layers and its record) are removed.
	named := map[string]bool{}
	for _, img := range s.images {
		for _, l := range img.LayerDigests {
			named[l] = true
		}
	}
	for l := range s.layers {
		if !named[l] {
			s.removeLayer(l)
		}
	}
}

// fill sets an image's layer directories from its digests.
func (s *Store) fill(img *Image) {
	img.Layers = make([]string, len(img.LayerDigests))
	for i, l := range img.LayerDigests {
		img.Layers[i] = s.layerDir(l)
	}
}

func (s *Store) layerDir(digest string) string {
	return filepath.Join(s.opts.Dir, "layers", hexOf(digest))
}

func hexOf(digest string) string {
	_, h, _ := strings.Cut(digest, ":")
	return h
}

// Get returns the image req.Ref names, fetching and unpacking what the
// node lacks, once the tenant's right to it is known, and holds it: GC
// will not remove it until release is called (once per Get).
func (s *Store) Get(ctx context.Context, req Request) (*Image, func(), error) {
	ref, err := name.NewDigest(req.Ref)
	if err != nil {
		return nil, nil, fmt.Errorf("image reference %q: %w (the manager resolves a tag to registry/repo@sha256:…)", req.Ref, err)
	}
	creds, err := credentialsID(req.Keychain, ref)
	if err != nil {
		return nil, nil, err
	}
	// An image pulled can be removed by another pull's GC before it is
	// held: look it up again, a bounded number of times.
	for range 3 {
		img := s.cached(ref)
		if img == nil {
			v, err, _ := s.flights.Do(ref.String(), func() (any, error) {
				return s.pull(ctx, ref, req, creds)
			})
			if err != nil {
				return nil, nil, err
			}
			img = v.(*Image)
		}
		if err := s.authorize(ctx, ref, img, req, creds); err != nil {
			return nil, nil, err
		}
		if release, ok := s.hold(img.Digest); ok {
			return img, release, nil
		}
	}
	return nil, nil, fmt.Errorf("image %s was removed from the node's store as soon as it was pulled: the store's bound is too small for the images in use", ref)
}

// Hold holds an image already in the store, by digest, without asking the
// registry: for a sandbox that was running it before the agent restarted,
// whose right was checked when it started.
func (s *Store) Hold(digest string) (*Image, func(), error) {
	s.mu.Lock()
	img, ok := s.images[digest]
	if !ok {
		if m, ok2 := s.refs[digest]; ok2 {
			img, ok = s.images[m]
		}
	}
	s.mu.Unlock()
	if ok {
		if release, held := s.hold(img.Digest); held {
			return img, release, nil
		}
	}
	return nil, nil, fmt.Errorf("image %s is not in the node's store", digest)
}

// hold holds an image the store still has.
func (s *Store) hold(digest string) (func(), bool) {
	s.mu.Lock()
	if _, ok := s.images[digest]; !ok {
		s.mu.Unlock()
		return nil, false
	}
	s.held[digest]++
	s.touch(digest)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.held[digest]--
			if s.held[digest] <= 0 {
				delete(s.held, digest)
			}
			s.touch(digest)
			s.mu.Unlock()
		})
	}, true
}

// touch records that an image was used now (in memory, and as its
// record's time, which a restarted store reads back). Called with s.mu.
func (s *Store) touch(digest string) {
	now := s.opts.Now()
	s.used[digest] = now
	_ = os.Chtimes(filepath.Join(s.opts.Dir, "images", hexOf(digest)+".json"), now, now)
}

func (s *Store) cached(ref name.Digest) *Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.images[s.refs[ref.DigestStr()]]
}

// authorize lets a tenant use a cached image: a public one always; a
// private one once the registry, asked under the tenant's credentials,
// says it may have it (trusted for CheckTTL).
func (s *Store) authorize(ctx context.Context, ref name.Digest, img *Image, req Request, creds string) error {
	if img.Public {
		return nil
	}
	key := checkKey{req.Tenant, img.Digest, creds}
	s.mu.Lock()
	at, ok := s.checks[key]
	s.mu.Unlock()
	if ok && s.opts.Now().Sub(at) < s.opts.CheckTTL {
		return nil
	}
	opts := append(append([]remote.Option{}, s.opts.Remote...), remote.WithContext(ctx), s.auth(req.Keychain))
	if _, err := remote.Head(ref, opts...); err != nil {
		return &DeniedError{Ref: ref.String(), Tenant: req.Tenant, Err: err}
	}
	s.remember(key)
	return nil
}

func (s *Store) remember(key checkKey) {
	s.mu.Lock()
	s.checks[key] = s.opts.Now()
	s.mu.Unlock()
}

// DeniedError is a cached private image a tenant was not shown to have a
// right to: the registry refused its credentials, or could not be asked.
type DeniedError struct {
	Ref    string
	Tenant string
	Err    error
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("image %s is private and the registry did not confirm that tenant %s may pull it (give the tenant a pull Secret that can, or wait for the registry): %v", e.Ref, e.Tenant, e.Err)
}

func (e *DeniedError) Unwrap() error { return e.Err }

func (s *Store) auth(kc authn.Keychain) remote.Option {
	if kc == nil {
		return remote.WithAuth(authn.Anonymous)
	}
	return remote.WithAuthFromKeychain(kc)
}

// credentialsID names the credentials a keychain gives for ref's registry,
// so that a check made with one set is not trusted for another.
func credentialsID(kc authn.Keychain, ref name.Digest) (string, error) {
	if kc == nil {
		return "", nil
	}
	a, err := kc.Resolve(ref.Context())
	if err != nil {
		return "", fmt.Errorf("pull credentials for %s: %w", ref.Context().RegistryStr(), err)
	}
	if a == authn.Anonymous {
		return "", nil
	}
	cfg, err := a.Authorization()
	if err != nil {
		return "", fmt.Errorf("pull credentials for %s: %w", ref.Context().RegistryStr(), err)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// pull fetches an image's manifest and config, then each layer the store
// lacks, and records the image.
func (s *Store) pull(ctx context.Context, ref name.Digest, req Request, creds string) (*Image, error) {
	opts := append(append([]remote.Option{}, s.opts.Remote...),
		remote.WithContext(ctx), s.auth(req.Keychain),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	rimg, err := remote.Image(ref, opts...)
	if err != nil {
		return nil, fmt.Errorf("fetching image %s: %w", ref, err)
	}
	digest, err := rimg.Digest()
	if err != nil {
		return nil, err
	}
	manifest, err := rimg.Manifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: its manifest: %w", ref, err)
	}
	cfg, err := rimg.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: its config: %w", ref, err)
	}
	if cfg.OS != "" && cfg.OS != "linux" {
		return nil, refused(ReasonUnsupported, "", "image %s is for %s, not linux", ref, cfg.OS)
	}
	if n := len(manifest.Layers); n > s.opts.MaxLayers {
		return nil, refused(ReasonTooLarge, "", "image %s has %d layers, past the node's bound of %d", ref, n, s.opts.MaxLayers)
	}
	if len(cfg.RootFS.DiffIDs) != len(manifest.Layers) {
		return nil, refused(ReasonMalformed, "", "image %s: its config lists %d layers, its manifest %d", ref, len(cfg.RootFS.DiffIDs), len(manifest.Layers))
	}
	img := &Image{
		Digest: digest.String(),
		Config: Config{Env: cfg.Config.Env, WorkingDir: cfg.Config.WorkingDir, User: cfg.Config.User},
		Public: req.Keychain == nil,
		Refs:   []string{ref.DigestStr()},
	}
	if digest.String() != ref.DigestStr() {
		img.Refs = append(img.Refs, digest.String())
	}
	var total, done int64
	var missing []int
	s.mu.Lock()
	for i, d := range manifest.Layers {
		if d.Size > s.opts.MaxLayerBytes || d.Size < 0 {
			s.mu.Unlock()
			return nil, refused(ReasonTooLarge, "", "image %s: layer %s is %d bytes compressed, past the node's bound of %d", ref, d.Digest, d.Size, s.opts.MaxLayerBytes)
		}
		if _, ok := s.layers[d.Digest.String()]; !ok {
			missing = append(missing, i)
			total += d.Size
		}
	}
	s.mu.Unlock()
	progress := func(n int64) {
		if req.Progress != nil {
			done += n
			req.Progress(done, total)
		}
	}
	layers, err := rimg.Layers()
	if err != nil {
		return nil, err
	}
	for _, i := range missing {
		d := manifest.Layers[i]
		_, err, _ := s.flights.Do("layer "+d.Digest.String(), func() (any, error) {
			return nil, s.fetchLayer(layers[i], d, cfg.RootFS.DiffIDs[i], progress)
		})
		if err != nil {
			return nil, fmt.Errorf("image %s: layer %s: %w", ref, d.Digest, err)
		}
	}
	s.mu.Lock()
	for _, d := range manifest.Layers {
		l := d.Digest.String()
		img.LayerDigests = append(img.LayerDigests, l)
		img.Bytes += s.layers[l]
		var r layerRecord
		if err := readJSON(s.layerDir(l)+".json", &r); err == nil {
			img.Notes = append(img.Notes, r.Notes...)
		}
	}
	s.fill(img)
	s.mu.Unlock()
	if err := writeJSON(filepath.Join(s.opts.Dir, "images", hexOf(img.Digest)+".json"), img); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.images[img.Digest] = img
	for _, r := range img.Refs {
		s.refs[r] = img.Digest
	}
	s.touch(img.Digest)
	if !img.Public {
		// The pull was the registry's yes to these credentials.
		s.checks[checkKey{req.Tenant, img.Digest, creds}] = s.opts.Now()
	}
	err = s.gc(img.Digest)
	if err != nil && s.held[img.Digest] == 0 {
		s.removeImage(img.Digest)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return img, nil
}

// fetchLayer streams one layer from the registry through its decompressor
// into a directory of tmp/, checks both digests, and moves it into place.
func (s *Store) fetchLayer(l v1.Layer, d v1.Descriptor, diffID v1.Hash, progress func(int64)) error {
	s.mu.Lock()
	_, have := s.layers[d.Digest.String()]
	s.mu.Unlock()
	if have {
		return nil
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.MkdirTemp(filepath.Join(s.opts.Dir, "tmp"), "layer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "root")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}

	compressed := sha256.New()
	src := io.TeeReader(&counting{r: io.LimitReader(rc, d.Size+1), on: progress}, compressed)
	var plain io.Reader
	switch d.MediaType {
	// Foreign and non-distributable layers are refused with the rest:
	// they are fetched from URLs the image names, anywhere.
	case types.DockerLayer, types.OCILayer:
		gz, err := gzip.NewReader(src)
		if err != nil {
			return refused(ReasonMalformed, "", "not gzip: %v", err)
		}
		defer gz.Close()
		plain = gz
	case types.OCILayerZStd:
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(64<<20))
		if err != nil {
			return refused(ReasonMalformed, "", "not zstd: %v", err)
		}
		defer zr.Close()
		plain = zr
	case types.OCIUncompressedLayer, types.OCIUncompressedRestrictedLayer:
		plain = src
	default:
		return refused(ReasonUnsupported, "", "layer media type %q", d.MediaType)
	}
	// A layer the registry altered is a digest mismatch, whichever of
	// the decompressor, the tar reader or the unpacker met it first:
	// finish reading what was sent and say so when its digest differs.
	mismatch := func(err error) error {
		_, _ = io.Copy(io.Discard, src)
		if h := "sha256:" + hex.EncodeToString(compressed.Sum(nil)); h != d.Digest.String() {
			return refused(ReasonDigestMismatch, "", "the registry sent a layer whose digest is %s", h)
		}
		return err
	}
	uncompressed := sha256.New()
	bounded := &boundedReader{r: plain, left: s.opts.MaxLayerBytes}
	got, err := unpack(dir, io.TeeReader(bounded, uncompressed), layerLimits{bytes: s.opts.MaxLayerBytes, entries: s.opts.MaxLayerEntries})
	if err != nil {
		return mismatch(err)
	}
	// The tar stream ends before its padding, and the compressed stream
	// may go on past it: read both to their ends, so that both digests
	// cover every byte.
	if _, err := io.Copy(io.Discard, io.TeeReader(bounded, uncompressed)); err != nil {
		return mismatch(refused(ReasonMalformed, "", "decompressing the layer: %v", err))
	}
	if bounded.over {
		return refused(ReasonTooLarge, "", "the layer decompresses past %d bytes", s.opts.MaxLayerBytes)
	}
	if err := mismatch(nil); err != nil {
		return err
	}
	if h := "sha256:" + hex.EncodeToString(uncompressed.Sum(nil)); h != diffID.String() {
		return refused(ReasonDigestMismatch, "", "the layer's content has digest %s, its config says %s", h, diffID)
	}
	bytes, err := du(dir)
	if err != nil {
		return err
	}
	final := s.layerDir(d.Digest.String())
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(dir, final); err != nil {
		return err
	}
	rec := layerRecord{Digest: d.Digest.String(), DiffID: diffID.String(), Bytes: bytes, Notes: got.Notes, MoreNotes: got.MoreNotes}
	if err := writeJSON(final+".json", rec); err != nil {
		return err
	}
	s.mu.Lock()
	s.layers[d.Digest.String()] = bytes
	s.mu.Unlock()
	return nil
}

// GC removes the least recently used images no sandbox holds until the
// store is within its bound, with the layers no other image names. It
// fails when the images held alone pass the bound.
func (s *Store) GC() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gc("")
}

// gc is GC keeping the image keep (one just pulled, not yet held). Called
// with s.mu.
func (s *Store) gc(keep string) error {
	total := int64(0)
	for _, b := range s.layers {
		total += b
	}
	if total <= s.opts.MaxBytes {
		return nil
	}
	var free []string
	for d := range s.images {
		if s.held[d] == 0 && d != keep {
			free = append(free, d)
		}
	}
	sort.Slice(free, func(i, j int) bool { return s.used[free[i]].Before(s.used[free[j]]) })
	for _, d := range free {
		if total <= s.opts.MaxBytes {
			break
		}
		total -= s.removeImage(d)
	}
	if total > s.opts.MaxBytes {
		return fmt.Errorf("image store: images in use take %d bytes, past the node's bound of %d (raise --image-store-bytes, or run fewer images on this node)", total, s.opts.MaxBytes)
	}
	return nil
}

// removeImage forgets an image and removes the layers no other image
// names, returning the bytes freed. Called with s.mu.
func (s *Store) removeImage(digest string) int64 {
	img := s.images[digest]
	delete(s.images, digest)
	delete(s.used, digest)
	for _, r := range img.Refs {
		if s.refs[r] == digest {
			delete(s.refs, r)
		}
	}
	_ = os.Remove(filepath.Join(s.opts.Dir, "images", hexOf(digest)+".json"))
	var freed int64
	for _, l := range img.LayerDigests {
		if s.named(l) {
			continue
		}
		freed += s.layers[l]
		s.removeLayer(l)
	}
	return freed
}

func (s *Store) named(layer string) bool {
	for _, img := range s.images {
		for _, l := range img.LayerDigests {
			if l == layer {
				return true
			}
		}
	}
	return false
}

func (s *Store) removeLayer(digest string) {
	delete(s.layers, digest)
	// The record goes first: a layer directory without one is removed
	// when the store next opens.
	_ = os.Remove(s.layerDir(digest) + ".json")
	_ = os.RemoveAll(s.layerDir(digest))
}

// Images lists the images in the store, with whether a sandbox holds each.
func (s *Store) Images() []ImageStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ImageStatus, 0, len(s.images))
	for d, img := range s.images {
		out = append(out, ImageStatus{Digest: d, Bytes: img.Bytes, Held: s.held[d], LastUsed: s.used[d]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out
}

// ImageStatus is one image of Images.
type ImageStatus struct {
	Digest   string
	Bytes    int64
	Held     int
	LastUsed time.Time
}

// Bytes is the disk the store's layers take.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total int64
	for _, b := range s.layers {
		total += b
	}
	return total
}

type counting struct {
	r  io.Reader
	on func(int64)
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.on(int64(n))
	}
	return n, err
}

// boundedReader reads at most left bytes, then reports over instead of
// reading on: a layer that decompresses past its bound is refused.
type boundedReader struct {
	r    io.Reader
	left int64
	over bool
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			b.over = true
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// du is the disk a directory's files take, in bytes of allocated blocks.
func du(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		total += blocks(fi)
		return nil
	})
	return total, err
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON writes a record whole or not at all.
func writeJSON(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
