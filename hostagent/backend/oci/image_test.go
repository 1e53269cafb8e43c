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

package oci

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/imagestore"
	"github.com/playground-dev/playground/internal/registrytest"
)

// imageNode is a registry with two system images of this machine's
// files, and a node's image store that pulls from it.
type imageNode struct {
	store          *imagestore.Store
	merged, nousr  string // references by digest
	release        []func()
	mergedOSName   string
	unmergedOSName string
}

func newImageNode(t *testing.T) *imageNode {
	t.Helper()
	reg := registrytest.Start(t)
	n := &imageNode{mergedOSName: "ID=merged-test-image\n", unmergedOSName: "ID=unmerged-test-image\n"}
	// A usrmerge system (/bin, /lib, /lib64 links into /usr), with a
	// setuid-root copy of its shell and an environment of its own.
	n.merged = reg.PushMergedSystem(t, n.mergedOSName)
	secret := registrytest.NodeSecret(t)
	// A system of real /bin, /lib, /lib64, and no /usr, /sbin at all; its
	// os-release in a second layer.
	unmerged := registrytest.System(t, "ID=overwritten\n", false, "dash", "cat")
	n.nousr = reg.Push(t, "system/nousr", "1", registrytest.Image(t, nil,
		registrytest.Layer(t, registrytest.Tar(t, unmerged...)),
		registrytest.Layer(t, registrytest.Tar(t, registrytest.File("etc/os-release", n.unmergedOSName, 0o644),
			// A link at a file of the node's: never followed on the node.
			registrytest.Symlink("etc/timezone", secret)))), nil)
	s, err := imagestore.Open(imagestore.Options{Dir: t.TempDir(), PlainHTTP: []string{reg.Host}})
	if err != nil {
		t.Fatal(err)
	}
	n.store = s
	t.Cleanup(func() {
		for _, r := range n.release {
			r()
		}
	})
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
	n.release = append(n.release, release)
	return &backend.Image{Digest: img.Digest, Layers: img.Layers, Env: img.Config.Env, WorkingDir: img.Config.WorkingDir}
}

// TestImageIsTheSystem: a sandbox on an image sees the image's system
// (its os-release, its tools and only those), a default sandbox on the
// same node the node's; two sandboxes of one image share one unpacked
// copy and one mount; the image's setuid-root shell gives no privilege;
// its environment reaches a login shell; an image change keeps the
// workspace and the pile.
func TestImageIsTheSystem(t *testing.T) {
	requireRunc(t)
	n := newImageNode(t)
	b := newBackend(t, newStateDir(t))
	testImageIsTheSystem(t, b, n, "")
}

func testImageIsTheSystem(t *testing.T, b *Backend, n *imageNode, isolation string) {
	ctx := context.Background()
	merged := n.image(t, n.merged)
	bytesOne := n.store.Bytes()
	startSandbox(t, b, backend.Spec{ID: "img-a", Tenant: "t/a", Isolation: isolation, Image: merged})
	startSandbox(t, b, backend.Spec{ID: "img-b", Tenant: "t/b", Isolation: isolation, Image: n.image(t, n.merged)})
	startSandbox(t, b, backend.Spec{ID: "plain", Tenant: "t/c", Isolation: isolation})

	if got := sh(t, b, "img-a", "cat /etc/os-release"); got != n.mergedOSName {
		t.Errorf("the image sandbox's /etc/os-release is %q, want the image's %q", got, n.mergedOSName)
	}
	if got := sh(t, b, "img-b", "cat /etc/os-release"); got != n.mergedOSName {
		t.Errorf("the second image sandbox's /etc/os-release is %q, want the image's", got)
	}
	node, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, "plain", "cat /etc/os-release"); got != string(node) {
		t.Errorf("the default sandbox's /etc/os-release is %q, want the node's", got)
	}
	// The image has dash and cat, not the node's other tools.
	if got := sh(t, b, "img-a", "for t in dash cat ls id; do command -v $t >/dev/null && echo $t; done; true"); got != "dash\ncat\n" {
		t.Errorf("the image sandbox's tools are %q, want dash and cat only", got)
	}
	if got := sh(t, b, "plain", "command -v ls"); got == "" {
		t.Error("the default sandbox has no ls")
	}
	// One unpacked copy, one mount of it.
	if got := n.store.Bytes(); got != bytesOne {
		t.Errorf("the store takes %d bytes with two sandboxes of one image, %d with one", got, bytesOne)
	}
	mounts, _ := os.ReadDir(filepath.Join(b.opts.StateDir, imagesDir))
	if len(mounts) != 1 {
		t.Errorf("the node has %d image mounts for one image, want 1", len(mounts))
	}

	// Exec, write and read; the pile written from the node (gVisor's is
	// read-only inside).
	if isolation == backend.IsolationGVisor {
		pile, err := os.OpenFile(filepath.Join(b.PileDir("img-a"), "self.pile"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pile.WriteString("pile\n"); err != nil {
			t.Fatal(err)
		}
		pile.Close()
	} else {
		sh(t, b, "img-a", "echo pile >> /pile/self.pile")
	}
	if got := sh(t, b, "img-a", "echo kept > /workspace/f && cat /workspace/f"); got != "kept\n" {
		t.Errorf("write and read in /workspace: %q", got)
	}
	// Nothing writes through the image.
	if r := run(t, b, "img-a", backend.ExecRequest{Command: "echo x > /usr/bin/new", Shell: backend.ShellClean}); r.Status.ExitCode == 0 {
		t.Error("the tenant wrote into the image's /usr")
	}
	// The setuid-root shell is neither setuid nor root's.
	if got := sh(t, b, "img-a", `[ -u /usr/bin/rootsh ] && echo setuid; /usr/bin/rootsh -c 'while read k r e rest; do case $k in Uid:) echo $r $e;; esac; done < /proc/self/status'`); got != "1000 1000\n" {
		t.Errorf("the image's setuid-root shell runs as %q, want the tenant (1000 1000) and no setuid bit", got)
	}
	// The image's Env, in a login shell; PATH keeps the faculties first.
	r := run(t, b, "img-a", backend.ExecRequest{Command: `echo "$IMAGE_GREETING"; echo "$PATH"`, Shell: backend.ShellLogin})
	if want := "hello from the image\n/opt/faculties/bin:/usr/bin\n"; r.Stdout != want {
		t.Errorf("a login shell's image environment: %q (stderr %q), want %q", r.Stdout, r.Stderr, want)
	}

	// An image change: a restart on the other system, the tenant's
	// files kept.
	if err := b.Stop(ctx, "img-a"); err != nil {
		t.Fatal(err)
	}
	startSandbox(t, b, backend.Spec{ID: "img-a", Tenant: "t/a", Isolation: isolation, Image: n.image(t, n.nousr)})
	if got := sh(t, b, "img-a", "cat /etc/os-release /workspace/f /pile/self.pile; [ -e /usr/bin/cat ] || echo no-usr; cat /etc/timezone 2>/dev/null || echo not-the-node-s"); got != n.unmergedOSName+"kept\npile\nno-usr\nnot-the-node-s\n" {
		t.Errorf("after the image change: %q", got)
	}
	// And back to the node's system, as an agent restarted after the
	// change takes it over: running, it starts afresh.
	if err := b.Reattach(ctx, backend.Spec{ID: "img-a", Tenant: "t/a", Isolation: isolation}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b, "img-a", "cat /etc/os-release /workspace/f"); got != string(node)+"kept\n" {
		t.Errorf("back on the node's system: %q", got)
	}

	// The last sandbox of an image gone, its mount goes.
	for _, id := range []string{"img-a", "img-b"} {
		if err := b.Destroy(ctx, id, false); err != nil {
			t.Fatal(err)
		}
	}
	if mounts, _ := os.ReadDir(filepath.Join(b.opts.StateDir, imagesDir)); len(mounts) != 0 {
		t.Errorf("image mounts left with no sandbox of theirs: %v", mounts)
	}
}

// TestImageIsTheSystemGVisor is TestImageIsTheSystem under gVisor, whose
// sentry binds the image's mount.
func TestImageIsTheSystemGVisor(t *testing.T) {
	runsc := requireRunsc(t)
	n := newImageNode(t)
	b := newGVisorBackend(t, newStateDir(t), runsc)
	testImageIsTheSystem(t, b, n, backend.IsolationGVisor)
}

// TestStopAllReleasesImages: StopAll (make dev's Ctrl-C) leaves no image
// mounted under the state directory, and a stopped sandbox of an image
// runs on it again when it starts.
func TestStopAllReleasesImages(t *testing.T) {
	requireRunc(t)
	n := newImageNode(t)
	state := newStateDir(t)
	b := newBackend(t, state)
	spec := backend.Spec{ID: "img-stop", Tenant: "t/a", Image: n.image(t, n.merged)}
	startSandbox(t, b, spec)
	stopAllLeavesNothing(t, b, state)
	b2 := newBackend(t, state)
	if err := b2.Reattach(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if err := b2.Start(context.Background(), spec.ID); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, b2, spec.ID, "cat /etc/os-release"); got != n.mergedOSName {
		t.Fatalf("started again after StopAll, the sandbox's /etc/os-release is %q, want its image's %q", got, n.mergedOSName)
	}
}
