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

package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/internal/registrytest"
)

// imageNode is a registry with two system images of this machine's
// files, and a node's image store that pulls from it.
type imageNode struct {
	store         *imagestore.Store
	merged, nousr string // references by digest
}

// The os-release of the images' systems.
const (
	mergedOSName   = "ID=merged-vm-image\n"
	unmergedOSName = "ID=unmerged-vm-image\n"
)

func newImageNode(t *testing.T) *imageNode {
	t.Helper()
	reg := registrytest.Start(t)
	n := &imageNode{}
	// A usrmerge system of a shell and cat: no sync, no ls, no /etc but
	// its os-release, none of the guest's mount points; and a setuid-root
	// copy of its shell.
	n.merged = reg.PushMergedSystem(t, mergedOSName)
	// Real /bin and /lib, no /usr; in a second layer its os-release, a
	// whiteout, an opaque directory and a link at a file of the node's.
	secret := registrytest.NodeSecret(t)
	lower := append(registrytest.System(t, "ID=overwritten\n", false, "dash", "cat"),
		registrytest.File("etc/removed", "x", 0o644), registrytest.Dir("opt/"), registrytest.Dir("opt/old/"), registrytest.File("opt/old/file", "x", 0o644))
	n.nousr = reg.Push(t, "system/nousr", "1", registrytest.Image(t, nil,
		registrytest.Layer(t, registrytest.Tar(t, lower...)),
		registrytest.Layer(t, registrytest.Tar(t, registrytest.File("etc/os-release", unmergedOSName, 0o644),
			registrytest.File("etc/.wh.removed", "", 0o644),
			registrytest.File("opt/old/.wh..wh..opq", "", 0o644), registrytest.File("opt/old/new", "x", 0o644),
			registrytest.Symlink("etc/timezone", secret)))), nil)
	s, err := imagestore.Open(imagestore.Options{Dir: t.TempDir(), PlainHTTP: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	n.store = s
	return n
}

// image gets ref from the store, held until the test ends, as the agent
// hands it to the backend.
func (n *imageNode) image(t *testing.T, ref string) *backend.Image {
	t.Helper()
	img, release, err := n.store.Get(context.Background(), imagestore.Request{Ref: ref, Tenant: "t/a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return &backend.Image{Digest: img.Digest, Layers: img.Layers, Env: img.Config.Env, WorkingDir: img.Config.WorkingDir}
}

// sh runs command in sandbox id and returns its stdout, failing t on an
// error or a non-zero exit.
func sh(ctx context.Context, t *testing.T, be *Backend, id, command string, mode backend.ShellMode) string {
	t.Helper()
	var out collect
	p, err := be.Exec(ctx, id, backend.ExecRequest{Command: command, Shell: mode}, &out)
	if err != nil {
		t.Fatalf("%s in %s: %v", command, id, err)
	}
	st, err := p.Wait(ctx)
	if err != nil || st.ExitCode != 0 {
		t.Fatalf("%s in %s: exit %d, %v (stdout %q)", command, id, st.ExitCode, err, out.String())
	}
	return out.String()
}

// imageDisks lists the files of the backend's images directory.
func imageDisks(t *testing.T, be *Backend) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(be.opts.StateDir, imagesDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestImageIsTheRoot: VMs on an image boot on a root disk made of it (its
// os-release, its tools and no others, its environment in a login shell),
// though it has nothing of the guest's but a /bin/sh; two sandboxes that
// ask for one digest at once share one disk, built once; an image change
// boots the VM on the new image with its workspace and pile, even one
// written just before (the image has no sync); a disk goes with the last
// sandbox that names its digest.
func TestImageIsTheRoot(t *testing.T) {
	n := newImageNode(t)
	ctx := context.Background()
	be := newBackend(ctx, t)
	merged := n.image(t, n.merged)

	// Two sandboxes of one digest, provisioned at once.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, id := range []string{"img-a", "img-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = be.Provision(ctx, backend.Spec{ID: id, Tenant: "t/" + id, Image: merged})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := be.imageBuilds.Load(); got != 1 {
		t.Errorf("two sandboxes of one image built %d root disks, want 1", got)
	}
	if disks := imageDisks(t, be); len(disks) != 1 {
		t.Errorf("the images directory holds %v, want one disk", disks)
	}
	for _, id := range []string{"img-a", "img-b"} {
		if err := be.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"img-a", "img-b"} {
		if got := sh(ctx, t, be, id, "cat /etc/os-release", backend.ShellClean); got != mergedOSName {
			t.Errorf("%s's /etc/os-release is %q, want the image's %q", id, got, mergedOSName)
		}
	}
	// The image's tools, not the default root's (which has ls and sync).
	if got := sh(ctx, t, be, "img-a", "for t in dash cat ls sync; do command -v $t >/dev/null && echo $t; done; true", backend.ShellClean); got != "dash\ncat\n" {
		t.Errorf("the image sandbox's tools are %q, want dash and cat only", got)
	}
	// The guest's /etc files and the tenant's user, on an image without them.
	if got := sh(ctx, t, be, "img-a", `read -r h < /etc/hostname; echo "$h"; while IFS=: read -r u x id rest; do [ "$id" = 1000 ] && echo "$u"; done < /etc/passwd; true`, backend.ShellClean); got != "img-a\nsandbox\n" {
		t.Errorf("the image sandbox's hostname and tenant: %q", got)
	}
	r := sh(ctx, t, be, "img-a", `echo "$IMAGE_GREETING"; echo "$PATH"`, backend.ShellLogin)
	if want := "hello from the image\n/opt/faculties/bin:/usr/bin\n"; r != want {
		t.Errorf("a login shell's image environment: %q, want %q", r, want)
	}
	// The setuid-root shell is neither setuid nor root's.
	if got := sh(ctx, t, be, "img-a", `[ -u /usr/bin/rootsh ] && echo setuid; /usr/bin/rootsh -c 'while read k r e rest; do case $k in Uid:) echo $r $e;; esac; done < /proc/self/status'`, backend.ShellClean); got != "1000 1000\n" {
		t.Errorf("the image's setuid-root shell runs as %q, want the tenant (1000 1000) and no setuid bit", got)
	}
	// Nothing writes to the image's disk.
	var out collect
	p, err := be.Exec(ctx, "img-a", backend.ExecRequest{Command: "echo x > /usr/bin/new", Shell: backend.ShellClean}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(ctx); err != nil || st.ExitCode == 0 {
		t.Errorf("the tenant wrote into the image's /usr (exit %d, %v)", st.ExitCode, err)
	}

	// An image change: what was written just before is kept.
	sh(ctx, t, be, "img-a", "echo kept > /workspace/f; echo pile >> /pile/self.pile", backend.ShellClean)
	if err := be.Stop(ctx, "img-a"); err != nil {
		t.Fatal(err)
	}
	running(ctx, t, be, backend.Spec{ID: "img-a", Tenant: "t/img-a", Image: n.image(t, n.nousr)})
	if got := sh(ctx, t, be, "img-a", "cat /etc/os-release /workspace/f /pile/self.pile; [ -e /usr/bin/cat ] || echo no-usr", backend.ShellClean); got != unmergedOSName+"kept\npile\nno-usr\n" {
		t.Errorf("after the image change: %q", got)
	}
	// Its layers merged by the OCI rules; its link resolved in the guest,
	// never copied from the node.
	if got := sh(ctx, t, be, "img-a", "[ -e /etc/removed ] || echo whited-out; echo /opt/old/*; cat /etc/timezone 2>/dev/null || echo not-the-node-s", backend.ShellClean); got != "whited-out\n/opt/old/new\nnot-the-node-s\n" {
		t.Errorf("the second image's merged layers: %q", got)
	}
	if disks := imageDisks(t, be); len(disks) != 2 {
		t.Errorf("with sandboxes on two images the images directory holds %v, want two disks", disks)
	}
	// The last sandbox of the first image gone, its disk goes.
	if err := be.Destroy(ctx, "img-b", false); err != nil {
		t.Fatal(err)
	}
	if disks := imageDisks(t, be); len(disks) != 1 || disks[0] != filepath.Base(be.imageDisk(imageOf(backend.Spec{Image: n.image(t, n.nousr)}))) {
		t.Errorf("with one image in use the images directory holds %v, want its disk", disks)
	}
	// Back to the first image, as an agent restarted after the change
	// takes it over: running, it boots afresh on it (its disk built again).
	if err := be.Reattach(ctx, backend.Spec{ID: "img-a", Tenant: "t/img-a", Image: merged}); err != nil {
		t.Fatal(err)
	}
	if got := sh(ctx, t, be, "img-a", "cat /etc/os-release /workspace/f", backend.ShellClean); got != mergedOSName+"kept\n" {
		t.Errorf("back on the first image: %q", got)
	}
	if err := be.Destroy(ctx, "img-a", false); err != nil {
		t.Fatal(err)
	}
	if disks := imageDisks(t, be); len(disks) != 0 {
		t.Errorf("root disks left with no sandbox of theirs: %v", disks)
	}
}

// TestImageDiskKeepsTheReserve: an image's root disk counts against the
// node's free-space reserve: a sandbox moved to an image whose disk would
// take the node below it is refused (typed, saying so), and no disk, nor
// any part of its build, is left.
func TestImageDiskKeepsTheReserve(t *testing.T) {
	n := newImageNode(t)
	dir := newStateDir(t)
	ctx := context.Background()
	open := func(reserve int64) *Backend { return openWithReserve(t, dir, reserve) }
	spec := backend.Spec{ID: "before", Tenant: "t/before"}
	if err := open(0).Provision(ctx, spec); err != nil {
		t.Fatal(err)
	}
	full := open(1 << 62) // more than any disk: the node is "full"
	spec.Image = n.image(t, n.merged)
	err := full.Provision(ctx, spec)
	if !errors.Is(err, backend.ErrInsufficientStorage) || !strings.Contains(err.Error(), "root disk") {
		t.Fatalf("an image's root disk below the reserve: %v, want ErrInsufficientStorage naming the root disk", err)
	}
	if disks := imageDisks(t, full); len(disks) != 0 {
		t.Errorf("a refused build left %v", disks)
	}
	if rec, err := full.load(spec.ID); err != nil || rec.Spec.Image != nil {
		t.Errorf("the refused sandbox's record: %+v, %v; want it on the default root still", rec, err)
	}
}

// TestImageOfTooManyLayers: an image of more layers than one overlay
// mount takes (the page of its options) is refused at provisioning,
// saying to flatten it, and leaves nothing.
func TestImageOfTooManyLayers(t *testing.T) {
	kernel, modules, root := vmImage(t)
	reg := registrytest.Start(t)
	layers := []v1.Layer{registrytest.Layer(t, registrytest.Tar(t, registrytest.System(t, "ID=layers\n", true, "dash")...))}
	for i := range 80 {
		layers = append(layers, registrytest.Layer(t, registrytest.Tar(t, registrytest.File(fmt.Sprintf("etc/layer%d", i), "x", 0o644))))
	}
	ref := reg.Push(t, "system/layers", "1", registrytest.Image(t, nil, layers...), nil)
	s, err := imagestore.Open(imagestore.Options{Dir: t.TempDir(), PlainHTTP: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	n := &imageNode{store: s}
	be, err := New(context.Background(), Options{StateDir: newStateDir(t), GuestBinary: guestBinary(t), Kernel: kernel, Modules: modules, Root: root, Accel: AccelTCG})
	if err != nil {
		t.Fatal(err)
	}
	err = be.Provision(context.Background(), backend.Spec{ID: "layers", Tenant: "t/layers", Image: n.image(t, ref)})
	if err == nil || !strings.Contains(err.Error(), "flatten the image") {
		t.Fatalf("an image of 81 layers: %v, want a refusal saying to flatten it", err)
	}
	if disks := imageDisks(t, be); len(disks) != 0 {
		t.Errorf("a refused build left %v", disks)
	}
}
