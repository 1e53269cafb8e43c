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

// Package registrytest serves, for tests, a registry that speaks the OCI
// distribution API for real (go-containerregistry's, in process, on
// loopback), with repositories that may be private behind a password, and
// builds the images tests push to it from tar entries they write.
package registrytest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/subtle"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry is a registry on loopback.
type Registry struct {
	// Host is its host:port, the first part of its references.
	Host string

	srv *httptest.Server

	mu       sync.Mutex
	private  map[string][2]string     // repository prefix → user, password
	gets     map[string]int           // blob digest → GETs served
	corrupt  map[string]bool          // blob digests served with a byte changed
	stalled  map[string]chan struct{} // blob digests served half, then held until closed
	stopped  bool
	refusals int
}

// Start serves a registry until the test ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{private: map[string][2]string{}, gets: map[string]int{}, corrupt: map[string]bool{}, stalled: map[string]chan struct{}{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.serve(inner, w, req)
	}))
	t.Cleanup(r.srv.Close)
	r.Host = strings.TrimPrefix(r.srv.URL, "http://")
	return r
}

// Private puts the repositories under prefix behind a user and password.
func (r *Registry) Private(prefix, user, password string) {
	r.mu.Lock()
	r.private[prefix] = [2]string{user, password}
	r.mu.Unlock()
}

// Stop makes the registry answer nothing (every connection refused, as a
// registry that is down), or answer again.
func (r *Registry) Stop(stopped bool) {
	r.mu.Lock()
	r.stopped = stopped
	r.mu.Unlock()
}

// Corrupt makes the registry serve the blob with one byte changed.
func (r *Registry) Corrupt(digest string) {
	r.mu.Lock()
	r.corrupt[digest] = true
	r.mu.Unlock()
}

// Stall makes the registry serve the first half of the blob, then hold
// the rest until resume is called (or the test ends): a pull that is under
// way for as long as a test needs, with some of its bytes fetched.
func (r *Registry) Stall(t testing.TB, digest string) (resume func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.stalled[digest] = ch
	r.mu.Unlock()
	var once sync.Once
	resume = func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.stalled, digest)
			r.mu.Unlock()
			close(ch)
		})
	}
	t.Cleanup(resume)
	return resume
}

// BlobGets is how many times the blob was served.
func (r *Registry) BlobGets(digest string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[digest]
}

// Refusals is how many requests were refused for want of credentials.
func (r *Registry) Refusals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusals
}

func (r *Registry) serve(inner http.Handler, w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	stopped := r.stopped
	var need *[2]string
	for prefix, up := range r.private {
		if strings.HasPrefix(req.URL.Path, "/v2/"+prefix) {
			need = &up
		}
	}
	r.mu.Unlock()
	if stopped {
		// A registry that is down: the connection closes unanswered.
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if need != nil {
		u, p, ok := req.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(need[0])) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(need[1])) != 1 {
			r.mu.Lock()
			r.refusals++
			r.mu.Unlock()
			w.Header().Set("WWW-Authenticate", `Basic realm="registrytest"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
		digest := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
		r.mu.Lock()
		r.gets[digest]++
		corrupt, stall := r.corrupt[digest], r.stalled[digest]
		r.mu.Unlock()
		if stall != nil {
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body[:len(body)/2])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			select {
			case <-stall:
			case <-req.Context().Done():
				return
			}
			_, _ = w.Write(body[len(body)/2:])
			return
		}
		if corrupt {
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			if len(body) > 0 {
				body[len(body)/2] ^= 0xff
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
			return
		}
	}
	inner.ServeHTTP(w, req)
}

// Entry is one entry of a layer a test builds: a header, and a regular
// file's content.
type Entry struct {
	tar.Header
	Body []byte
}

// File is a regular file entry.
func File(name, body string, mode int64) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(body)), ModTime: time.Unix(1700000000, 0)}, Body: []byte(body)}
}

// Dir is a directory entry.
func Dir(name string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(1700000000, 0)}}
}

// Symlink is a symbolic link entry.
func Symlink(name, target string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777, ModTime: time.Unix(1700000000, 0)}}
}

// Hardlink is a hard link entry.
func Hardlink(name, target string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target, ModTime: time.Unix(1700000000, 0)}}
}

// Tar writes entries as a tar stream, as they are: names, links and modes
// are not checked (tests build hostile layers with it).
func Tar(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.Header
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.Body))
		}
		if h.Format == tar.FormatUnknown && len(h.PAXRecords) > 0 {
			h.Format = tar.FormatPAX
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("tar header %s: %v", h.Name, err)
		}
		if len(e.Body) > 0 {
			if _, err := tw.Write(e.Body); err != nil {
				t.Fatalf("tar body %s: %v", h.Name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Layer is a gzip-compressed layer of a tar stream.
func Layer(t testing.TB, tarStream []byte) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarStream)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Image is an image of layers (bottom first) with env in its config.
func Image(t testing.TB, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Env = env
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// Push puts an image in the registry as repo:tag and returns its
// reference by digest.
func (r *Registry) Push(t testing.TB, repo, tag string, img v1.Image, auth authn.Authenticator) string {
	t.Helper()
	ref, err := name.ParseReference(fmt.Sprintf("%s/%s:%s", r.Host, repo, tag))
	if err != nil {
		t.Fatal(err)
	}
	if auth == nil {
		auth = authn.Anonymous
	}
	if err := remote.Write(ref, img, remote.WithAuth(auth), remote.WithContext(context.Background())); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s/%s@%s", r.Host, repo, d)
}
