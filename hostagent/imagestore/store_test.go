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

package imagestore_test

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/internal/registrytest"
)

// open opens a store that reaches reg (a loopback registry, in cleartext).
func open(t *testing.T, reg *registrytest.Registry, opts imagestore.Options) *imagestore.Store {
	t.Helper()
	opts.PlainHTTP = append(opts.PlainHTTP, reg.Host)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := imagestore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, s *imagestore.Store, req imagestore.Request) *imagestore.Image {
	t.Helper()
	img, release, err := s.Get(context.Background(), req)
	if err != nil {
		t.Fatalf("Get %s: %v", req.Ref, err)
	}
	t.Cleanup(release)
	return img
}

// pullSecret is the keychain the agent will build from a tenant's
// kubernetes.io/dockerconfigjson Secret, handed to it by the manager.
func pullSecret(t *testing.T, host, user, password string) authn.Keychain {
	t.Helper()
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password)),
	}}})
	kc, err := k8schain.NewFromPullSecrets(context.Background(), []corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Name: "pull"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// mountImage mounts an image's layers as a sandbox's read-only system
// would see them (overlayfs, top layer first) and returns where.
func mountImage(t *testing.T, img *imagestore.Image) string {
	t.Helper()
	lower := make([]string, len(img.Layers))
	for i, l := range img.Layers {
		lower[len(img.Layers)-1-i] = l
	}
	at := t.TempDir()
	if err := unix.Mount("overlay", at, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(lower, ":")); err != nil {
		t.Fatalf("mounting the image's layers: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(at, unix.MNT_DETACH) })
	return at
}

// The layers are unpacked by the image spec's rules: a later layer's
// whiteout hides a file of an earlier one, an opaque directory hides the
// earlier directory's entries, and what a sandbox sees through overlayfs
// is the image's file system.
func TestLayersStackByTheImageSpec(t *testing.T) {
	reg := registrytest.Start(t)
	base := registrytest.Layer(t, registrytest.Tar(t,
		registrytest.Dir("etc/"),
		registrytest.File("etc/os-release", "ID=base\n", 0o644),
		registrytest.File("etc/gone", "x", 0o644),
		registrytest.Dir("opt/"),
		registrytest.Dir("opt/tool/"),
		registrytest.File("opt/tool/old", "old", 0o755),
		registrytest.Symlink("bin", "usr/bin"),
		registrytest.Dir("usr/"),
		registrytest.Dir("usr/bin/"),
		registrytest.File("usr/bin/hello", "#!/bin/sh\necho hello\n", 0o755),
		registrytest.Hardlink("usr/bin/hi", "usr/bin/hello"),
	))
	top := registrytest.Layer(t, registrytest.Tar(t,
		registrytest.File("etc/os-release", "ID=top\n", 0o644),
		registrytest.File("etc/.wh.gone", "", 0),
		registrytest.Dir("opt/tool/"),
		registrytest.File("opt/tool/.wh..wh..opq", "", 0),
		registrytest.File("opt/tool/new", "new", 0o755),
	))
	ref := reg.Push(t, "team/app", "v1", registrytest.Image(t, []string{"PATH=/usr/bin", "LANG=C.UTF-8"}, base, top), nil)

	img := get(t, open(t, reg, imagestore.Options{}), imagestore.Request{Ref: ref, Tenant: "a"})
	if len(img.Layers) != 2 || !img.Public {
		t.Fatalf("image: %d layers, public %v; want 2, public", len(img.Layers), img.Public)
	}
	if got := strings.Join(img.Config.Env, " "); got != "PATH=/usr/bin LANG=C.UTF-8" {
		t.Errorf("config env %q", got)
	}
	root := mountImage(t, img)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	if got := read("etc/os-release"); got != "ID=top\n" {
		t.Errorf("etc/os-release = %q, want the top layer's", got)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/gone")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("etc/gone, whited out by the top layer: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, "opt/tool/old")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opt/tool/old, under an opaque directory of the top layer: %v", err)
	}
	if got := read("opt/tool/new"); got != "new" {
		t.Errorf("opt/tool/new = %q", got)
	}
	if l, _ := os.Readlink(filepath.Join(root, "bin")); l != "usr/bin" {
		t.Errorf("bin links to %q", l)
	}
	var a, b unix.Stat_t
	_ = unix.Stat(filepath.Join(img.Layers[0], "usr/bin/hello"), &a)
	_ = unix.Stat(filepath.Join(img.Layers[0], "usr/bin/hi"), &b)
	if a.Ino == 0 || a.Ino != b.Ino {
		t.Errorf("usr/bin/hi is not a hard link of usr/bin/hello (inodes %d, %d)", a.Ino, b.Ino)
	}
	if fi, err := os.Stat(filepath.Join(root, "usr/bin/hello")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("usr/bin/hello: %v %v, want mode 0755", fi.Mode(), err)
	}
}

// Each of a hostile layer's ways out is refused with its reason, and
// nothing is written outside the store.
func TestHostileLayersAreRefused(t *testing.T) {
	outside := t.TempDir()
	bomb := make([]byte, 2<<20)
	cases := []struct {
		name    string
		entries []registrytest.Entry
		reason  string
	}{
		{"absolute name", []registrytest.Entry{registrytest.File(outside+"/abs", "x", 0o644)}, imagestore.ReasonPathEscapes},
		{"dot-dot name", []registrytest.Entry{registrytest.File("../../../../../../.."+outside+"/up", "x", 0o644)}, imagestore.ReasonPathEscapes},
		{"dot-dot inside", []registrytest.Entry{registrytest.Dir("a/"), registrytest.File("a/../../b", "x", 0o644)}, imagestore.ReasonPathEscapes},
		{"write through a symlink", []registrytest.Entry{registrytest.Symlink("out", outside), registrytest.File("out/through", "x", 0o644)}, imagestore.ReasonThroughLink},
		{"write through a relative symlink", []registrytest.Entry{registrytest.Symlink("up", "../../../../../../../.."), registrytest.File("up/tmp/x", "x", 0o644)}, imagestore.ReasonThroughLink},
		{"hard link out", []registrytest.Entry{registrytest.Hardlink("passwd", "../../../../../../../etc/passwd")}, imagestore.ReasonLinkEscapes},
		{"hard link absolute", []registrytest.Entry{registrytest.Hardlink("passwd", "/etc/passwd")}, imagestore.ReasonLinkEscapes},
		{"hard link through a symlink", []registrytest.Entry{registrytest.Symlink("etc", "/etc"), registrytest.Hardlink("passwd", "etc/passwd")}, imagestore.ReasonLinkEscapes},
		{"hard link to a symlink", []registrytest.Entry{registrytest.Symlink("s", "/etc/shadow"), registrytest.Hardlink("h", "s")}, imagestore.ReasonLinkEscapes},
		{"decompression bomb", []registrytest.Entry{{Header: tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644}, Body: bomb}}, imagestore.ReasonTooLarge},
		{"too many entries", manyEntries(70), imagestore.ReasonTooManyEntries},
	}
	reg := registrytest.Start(t)
	dir := t.TempDir()
	s := open(t, reg, imagestore.Options{Dir: dir, MaxLayerBytes: 1 << 20, MaxLayerEntries: 64})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref := reg.Push(t, "hostile", fmt.Sprint(i), registrytest.Image(t, nil, registrytest.Layer(t, registrytest.Tar(t, c.entries...))), nil)
			_, _, err := s.Get(context.Background(), imagestore.Request{Ref: ref, Tenant: "a"})
			var r *imagestore.RefusedError
			if !errors.As(err, &r) || r.Reason != c.reason {
				t.Fatalf("got %v, want a refusal for %s", err, c.reason)
			}
		})
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the layers wrote outside the store: %v", ents)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal(err)
	}
	if s.Bytes() != 0 || len(s.Images()) != 0 {
		t.Errorf("refused layers left %d bytes, %d images in the store", s.Bytes(), len(s.Images()))
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Errorf("refused unpacks left %v in tmp/", ents)
	}
}

func manyEntries(n int) []registrytest.Entry {
	var out []registrytest.Entry
	for i := range n {
		out = append(out, registrytest.File(fmt.Sprintf("f%d", i), "", 0o644))
	}
	return out
}

// What a layer may hold but a sandbox must not get is neutralised and
// said: setuid and setgid bits, device nodes, file capabilities, owners
// outside a sandbox's 65536 IDs.
func TestPrivilegeInALayerIsNeutralised(t *testing.T) {
	reg := registrytest.Start(t)
	suid := registrytest.File("bin/sh", "#!/bin/sh\n", 0o4755)
	sgid := registrytest.File("bin/sg", "x", 0o2755)
	capped := registrytest.File("bin/ping", "x", 0o755)
	capped.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}
	farOwner := registrytest.File("data", "x", 0o644)
	farOwner.Uid, farOwner.Gid = 100000, 1<<20
	owned := registrytest.File("app", "x", 0o644)
	owned.Uid, owned.Gid = 1000, 1000
	dev := registrytest.Entry{Header: tar.Header{Name: "dev/sda", Typeflag: tar.TypeBlock, Mode: 0o660, Devmajor: 8}}
	ref := reg.Push(t, "priv", "v1", registrytest.Image(t, nil, registrytest.Layer(t, registrytest.Tar(t,
		registrytest.Dir("bin/"), suid, sgid, capped, farOwner, owned, registrytest.Dir("dev/"), dev))), nil)

	img := get(t, open(t, reg, imagestore.Options{}), imagestore.Request{Ref: ref, Tenant: "a"})
	l := img.Layers[0]
	for _, p := range []string{"bin/sh", "bin/sg"} {
		fi, err := os.Stat(filepath.Join(l, p))
		if err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v (%v), want 0755 without setuid or setgid", p, fi.Mode(), err)
		}
	}
	if n, err := unix.Lgetxattr(filepath.Join(l, "bin/ping"), "security.capability", nil); err == nil || n > 0 {
		t.Errorf("bin/ping kept its file capabilities")
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(l, "data"), &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("data owned by %d:%d (%v), want 65534:65534", st.Uid, st.Gid, err)
	}
	if err := unix.Lstat(filepath.Join(l, "app"), &st); err != nil || st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("app owned by %d:%d (%v), want its own 1000:1000", st.Uid, st.Gid, err)
	}
	if _, err := os.Lstat(filepath.Join(l, "dev/sda")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dev/sda, a device node, was made: %v", err)
	}
	notes := strings.Join(img.Notes, "\n")
	for _, want := range []string{"bin/sh: setuid/setgid removed", "bin/sg: setuid/setgid removed", "bin/ping: file capabilities removed", "data: owner 100000:1048576", "dev/sda: device node dropped"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

// A layer whose bytes are not its digest's, or whose content is not its
// config's diff ID, is refused and not kept.
func TestDigestMismatchIsRefused(t *testing.T) {
	reg := registrytest.Start(t)
	layer := registrytest.Layer(t, registrytest.Tar(t, registrytest.File("f", strings.Repeat("content ", 1000), 0o644)))
	ref := reg.Push(t, "bad", "v1", registrytest.Image(t, nil, layer), nil)
	d, _ := layer.Digest()
	reg.Corrupt(d.String())
	s := open(t, reg, imagestore.Options{})
	_, _, err := s.Get(context.Background(), imagestore.Request{Ref: ref, Tenant: "a"})
	var r *imagestore.RefusedError
	if !errors.As(err, &r) || r.Reason != imagestore.ReasonDigestMismatch {
		t.Fatalf("a corrupted layer: got %v, want a digest mismatch", err)
	}
	if s.Bytes() != 0 {
		t.Errorf("the corrupted layer left %d bytes", s.Bytes())
	}
}

// Pulls of one image at once fetch each layer once; the layers two images
// share are fetched and kept once.
func TestConcurrentPullsShareTheirFetches(t *testing.T) {
	reg := registrytest.Start(t)
	shared := registrytest.Layer(t, registrytest.Tar(t, registrytest.File("shared", strings.Repeat("s", 50000), 0o644)))
	own := registrytest.Layer(t, registrytest.Tar(t, registrytest.File("own", "o", 0o644)))
	other := registrytest.Layer(t, registrytest.Tar(t, registrytest.File("other", "x", 0o644)))
	ref1 := reg.Push(t, "one", "v1", registrytest.Image(t, nil, shared, own), nil)
	ref2 := reg.Push(t, "two", "v1", registrytest.Image(t, nil, shared, other), nil)
	s := open(t, reg, imagestore.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := ref1
			if i == 7 {
				ref = ref2
			}
			_, release, err := s.Get(context.Background(), imagestore.Request{Ref: ref, Tenant: fmt.Sprint("t", i)})
			if err != nil {
				errs <- err
				return
			}
			release()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, l := range []v1.Layer{shared, own, other} {
		d, _ := l.Digest()
		if n := reg.BlobGets(d.String()); n != 1 {
			t.Errorf("layer %s fetched %d times, want once", d, n)
		}
	}
	imgs := s.Images()
	if len(imgs) != 2 {
		t.Fatalf("%d images in the store, want 2", len(imgs))
	}
	if sum := imgs[0].Bytes + imgs[1].Bytes; s.Bytes() >= sum {
		t.Errorf("the store takes %d bytes, not less than the two images' %d: the shared layer is kept twice", s.Bytes(), sum)
	}
}

// A private image cached on the node is used for a tenant only when the
// registry says, under that tenant's own credentials, that it may have
// it; a public one needs no asking, even with the registry down.
func TestCachedPrivateImageStaysPrivate(t *testing.T) {
	reg := registrytest.Start(t)
	reg.Private("team-a/", "alice", "s3cret")
	layer := registrytest.Layer(t, registrytest.Tar(t, registrytest.File("etc/os-release", "ID=private\n", 0o644)))
	private := reg.Push(t, "team-a/app", "v1", registrytest.Image(t, nil, layer), &authn.Basic{Username: "alice", Password: "s3cret"})
	public := reg.Push(t, "public/base", "v1", registrytest.Image(t, []string{"A=1"}, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("p", "p", 0o644)))), nil)

	now := time.Unix(1800000000, 0)
	var clock sync.Mutex
	s := open(t, reg, imagestore.Options{
		CheckTTL: time.Minute,
		Now:      func() time.Time { clock.Lock(); defer clock.Unlock(); return now },
		// A registry that is down is asked once, not with backoff.
		Remote: []remote.Option{remote.WithRetryBackoff(remote.Backoff{Duration: time.Millisecond, Steps: 1})},
	})
	ctx := context.Background()
	alice := pullSecret(t, reg.Host, "alice", "s3cret")
	get(t, s, imagestore.Request{Ref: private, Tenant: "team-a", Keychain: alice})
	get(t, s, imagestore.Request{Ref: public, Tenant: "team-a"})

	var denied *imagestore.DeniedError
	if _, _, err := s.Get(ctx, imagestore.Request{Ref: private, Tenant: "team-b"}); !errors.As(err, &denied) {
		t.Fatalf("team-b, with no pull Secret, got the cached private image: %v", err)
	}
	wrong := pullSecret(t, reg.Host, "alice", "guess")
	if _, _, err := s.Get(ctx, imagestore.Request{Ref: private, Tenant: "team-c", Keychain: wrong}); !errors.As(err, &denied) {
		t.Fatalf("team-c, with a wrong password, got the cached private image: %v", err)
	}
	get(t, s, imagestore.Request{Ref: private, Tenant: "team-d", Keychain: alice})
	d, _ := layer.Digest()
	if n := reg.BlobGets(d.String()); n != 1 {
		t.Errorf("the private layer was fetched %d times, want once", n)
	}

	// The registry down: the public image and a checked private one
	// still start; an unchecked tenant does not.
	reg.Stop(true)
	get(t, s, imagestore.Request{Ref: public, Tenant: "team-b"})
	get(t, s, imagestore.Request{Ref: private, Tenant: "team-a", Keychain: alice})
	if _, _, err := s.Get(ctx, imagestore.Request{Ref: private, Tenant: "team-b"}); !errors.As(err, &denied) {
		t.Fatalf("team-b got the private image with the registry down: %v", err)
	}
	// Past the check's lifetime, team-a is asked again.
	clock.Lock()
	now = now.Add(2 * time.Minute)
	clock.Unlock()
	if _, _, err := s.Get(ctx, imagestore.Request{Ref: private, Tenant: "team-a", Keychain: alice}); !errors.As(err, &denied) {
		t.Fatalf("team-a's check outlived its %v with the registry down: %v", time.Minute, err)
	}
	reg.Stop(false)
	get(t, s, imagestore.Request{Ref: private, Tenant: "team-a", Keychain: alice})
}

// Past its bound, the store removes the least recently used images no
// sandbox holds, and keeps the layers a kept image shares; it refuses an
// image that would pass the bound with only held images left.
func TestStoreKeepsToItsBound(t *testing.T) {
	reg := registrytest.Start(t)
	big := func(n string) v1.Layer {
		return registrytest.Layer(t, registrytest.Tar(t, registrytest.File(n, strings.Repeat(n, 300<<10), 0o644)))
	}
	shared := big("s")
	refs := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		refs[n] = reg.Push(t, "gc/"+n, "v1", registrytest.Image(t, nil, shared, big(n)), nil)
	}
	dir := t.TempDir()
	// Room for three layers of 300 KiB (and their metadata), not four.
	s := open(t, reg, imagestore.Options{Dir: dir, MaxBytes: 1100 << 10})
	ctx := context.Background()
	_, relA, err := s.Get(ctx, imagestore.Request{Ref: refs["a"], Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	relA()
	_, relB, err := s.Get(ctx, imagestore.Request{Ref: refs["b"], Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer relB()
	// c needs room: a, unheld, goes; b, held, and the shared layer stay.
	if _, relC, err := s.Get(ctx, imagestore.Request{Ref: refs["c"], Tenant: "t"}); err != nil {
		t.Fatal(err)
	} else {
		defer relC()
	}
	var have []string
	for _, img := range s.Images() {
		have = append(have, img.Digest)
	}
	if len(have) != 2 {
		t.Fatalf("after c: %d images, want b and c", len(have))
	}
	if s.Bytes() > 1100<<10 {
		t.Errorf("the store takes %d bytes, past its bound", s.Bytes())
	}
	// d cannot fit while b and c are held.
	if _, _, err := s.Get(ctx, imagestore.Request{Ref: refs["d"], Tenant: "t"}); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("d with b and c held: %v, want a refusal naming the bound", err)
	}
	if len(s.Images()) != 2 {
		t.Errorf("a refused image was kept")
	}

	// A store opened again has the images and layers it had.
	s2 := open(t, reg, imagestore.Options{Dir: dir, MaxBytes: 1100 << 10})
	if len(s2.Images()) != 2 || s2.Bytes() != s.Bytes() {
		t.Errorf("reopened: %d images, %d bytes; had 2, %d", len(s2.Images()), s2.Bytes(), s.Bytes())
	}
	if _, rel, err := s2.Hold(s.Images()[0].Digest); err != nil {
		t.Errorf("holding a kept image after a restart: %v", err)
	} else {
		rel()
	}
}

// Progress reports bytes fetched of the bytes to fetch, rising to the
// total.
func TestPullReportsProgress(t *testing.T) {
	reg := registrytest.Start(t)
	ref := reg.Push(t, "progress", "v1", registrytest.Image(t, nil,
		registrytest.Layer(t, registrytest.Tar(t, registrytest.File("a", strings.Repeat("a", 100000), 0o644))),
		registrytest.Layer(t, registrytest.Tar(t, registrytest.File("b", strings.Repeat("b", 100000), 0o644)))), nil)
	var last, total int64
	rising := true
	get(t, open(t, reg, imagestore.Options{}), imagestore.Request{Ref: ref, Tenant: "a", Progress: func(done, of int64) {
		if done < last {
			rising = false
		}
		last, total = done, of
	}})
	if !rising || total == 0 || last != total {
		t.Errorf("progress ended at %d of %d (rising %v)", last, total, rising)
	}
}

// A registry is reached over HTTPS only unless the node lists it: the
// registry client would fall back to cleartext for a loopback or private
// address, and a pull credential would cross the network in the clear.
func TestCleartextRegistryNeedsListing(t *testing.T) {
	reg := registrytest.Start(t)
	reg.Private("team-a/", "alice", "s3cret")
	ref := reg.Push(t, "team-a/app", "v1", registrytest.Image(t, nil, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("f", "f", 0o644)))), &authn.Basic{Username: "alice", Password: "s3cret"})
	s, err := imagestore.Open(imagestore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	refusals := reg.Refusals()
	_, _, err = s.Get(context.Background(), imagestore.Request{Ref: ref, Tenant: "a", Keychain: pullSecret(t, reg.Host, "alice", "s3cret")})
	if err == nil || !strings.Contains(err.Error(), "HTTPS only") {
		t.Fatalf("a pull from a cleartext registry not listed: %v, want a refusal saying HTTPS only", err)
	}
	if reg.Refusals() != refusals || reg.BlobGets("") != 0 {
		t.Errorf("the registry was reached in cleartext")
	}
}
