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
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Shared inodes. A file lock (flock(2), POSIX and OFD fcntl locks), an
// inotify watch and a lease belong to an inode, whatever mount it was
// reached through: had every sandbox the node's own inodes of the files
// they all read (BaseRoot's /usr, the host /etc entries, the guest binary,
// a faculty build used by several tenants, /dev/null), one tenant's `flock
// -x /usr/bin/env` would block every other tenant's, and a lock taken or a
// file read in one sandbox would be seen from another.
//
// So a runc sandbox reaches each of them through overlayfs mounts of its
// own: read-only, lower layers only (the kernel wants two without an upper
// layer; the second is an empty directory of the state directory). An
// overlay mount has inodes of its own, and a lock, a watch or a lease taken
// through it is on its inode: a second overlay of the same directory, or
// the directory itself, does not see it (checked on Linux 6.18 for flock,
// POSIX and OFD locks and inotify; TestNoSharedInodes checks it between two
// sandboxes). Reads go to the lower file, so the page cache stays shared.
// With no upper layer an overlay cannot be written through, not even by the
// node's root. Device nodes are the sandbox's own too: runc binds the
// node's /dev/null, /dev/zero and the rest into a container of a user
// namespace (and /dev/null over every masked file), so the runtime sees,
// in their place, nodes of a tmpfs of the sandbox's own.
//
// None of this is mounted on the node. runc starts in a mount namespace of
// its own (a copy of the agent's that receives the node's mounts but gives
// none back), where the agent has mounted the overlays under
// <sandbox>/base and bound the device nodes over /dev's; the container's
// namespace is a copy of that one, whose binds hold the overlays as long
// as the container lives, and the runtime's goes when runc exits. A
// reattach finds them in the running container and mounts nothing, a start
// makes new ones, and an agent that dies mid-start leaves no mount behind.
//
// The host /etc entries are not overlaid where they are, since an overlay
// shows a whole directory and the node's /etc holds secrets: the agent
// copies the listed entries (and hard-links the guest binary) into a
// snapshot, <state>/shared/<fingerprint>, immutable once made, which each
// sandbox overlays. A start that finds the node's entries changed (it
// looks at most once a second) makes a new one; one that no sandbox names
// in its shared.ref goes.
//
// gVisor sandboxes bind the node's paths as before: their files, devices,
// locks and watches are the sentry's, per sandbox (TestNoSharedInodes runs
// there too).

const (
	// baseName is the directory of a sandbox's overlay mount points.
	baseName = "base"
	// sharedDir (in the state directory) holds the snapshots.
	sharedDir = "shared"
	// sharedRef (in a sandbox's directory) names the snapshot its
	// container was made with.
	sharedRef = "shared.ref"
	// emptyDir (in the state directory) is every overlay's bottom layer.
	emptyDir = "empty"
	// sharedMount is the snapshot's mount point under baseName.
	sharedMount = "shared"
	// sharedGuest is the guest binary's name in a snapshot.
	sharedGuest = "playground-sandbox"
	// devMount is the device nodes' mount point under baseName.
	devMount = "dev"
	// imageEtcMount is an image's /etc's mount point under baseName.
	imageEtcMount = "image-etc"
)

// overlayOptions, beyond the layers: no redirect or metacopy xattr of a
// lower layer (a faculty build's files come from a tenant's builder) is
// followed.
const overlayOptions = "redirect_dir=nofollow,metacopy=off"

// sources say where the files every sandbox reads come from in a bundle:
// the node's own paths (gVisor), or the sandbox's overlays (runc).
type sources struct {
	dirs      []string          // the base directories, in order
	baseDirs  map[string]string // base directory → source
	etc       []string          // the /etc entries bound in
	etcDir    string            // where they are
	guest     string
	faculties map[string]string // faculty name → source
}

// hostSources are the node's own paths (sys's: the node's system, or
// its image's mount).
func (b *Backend) hostSources(sb *sandbox, sys system) sources {
	s := sources{
		dirs:      sys.dirs,
		baseDirs:  make(map[string]string, len(sys.dirs)),
		etc:       sys.etc,
		etcDir:    filepath.Join(sys.root, "etc"),
		guest:     b.guestBin,
		faculties: make(map[string]string, len(sb.spec.Faculties)),
	}
	for _, d := range sys.dirs {
		s.baseDirs[d] = filepath.Join(sys.root, d)
	}
	for _, f := range sb.spec.Faculties {
		s.faculties[f.Name] = f.Dir
	}
	return s
}

// overlay is one of a sandbox's overlay mounts: lower at
// <sandbox>/base/<name>.
type overlay struct {
	name, lower string
}

// baseDirMount is a base directory's mount point under baseName.
func baseDirMount(d string) string {
	return "dir" + strings.ReplaceAll(d, "/", "-")
}

// facultyMount is a faculty's mount point under baseName.
func facultyMount(name string) string { return "faculty-" + name }

// baseFor prepares sb's overlays and device nodes for its start by runc:
// it returns the bundle's sources in them, and the setup that mounts them,
// to run in the runtime's mount namespace (inMountNamespace).
func (b *Backend) baseFor(sb *sandbox, sys system) (sources, func() error, error) {
	tree, etc, err := b.sharedFor(sb)
	if err != nil {
		return sources{}, nil, err
	}
	base := filepath.Join(sb.dir, baseName)
	ovs := []overlay{{sharedMount, tree}}
	etcDir := filepath.Join(base, sharedMount, "etc")
	if sys.image {
		// The image's /etc entries, not the node's: an overlay of the
		// image's /etc (checked no link by inspectImage).
		ovs = append(ovs, overlay{imageEtcMount, filepath.Join(sys.root, "etc")})
		etc, etcDir = sys.etc, filepath.Join(base, imageEtcMount)
	}
	for _, d := range sys.dirs {
		ovs = append(ovs, overlay{baseDirMount(d), filepath.Join(sys.root, d)})
	}
	for _, f := range sb.spec.Faculties {
		ovs = append(ovs, overlay{facultyMount(f.Name), f.Dir})
	}
	if err := mountPoints(base, append([]string{devMount}, overlayNames(ovs)...)); err != nil {
		return sources{}, nil, err
	}
	s := sources{
		dirs:      sys.dirs,
		baseDirs:  make(map[string]string, len(sys.dirs)),
		etc:       etc,
		etcDir:    etcDir,
		guest:     filepath.Join(base, sharedMount, sharedGuest),
		faculties: make(map[string]string, len(sb.spec.Faculties)),
	}
	for _, d := range sys.dirs {
		s.baseDirs[d] = filepath.Join(base, baseDirMount(d))
	}
	for _, f := range sb.spec.Faculties {
		s.faculties[f.Name] = filepath.Join(base, facultyMount(f.Name))
	}
	empty := filepath.Join(b.opts.StateDir, emptyDir)
	setup := func() error {
		for _, o := range ovs {
			if err := mountOverlay(o.lower, empty, filepath.Join(base, o.name)); err != nil {
				return fmt.Errorf("oci: sandbox %s: %w", sb.spec.ID, err)
			}
		}
		if err := mountDevices(filepath.Join(base, devMount)); err != nil {
			return fmt.Errorf("oci: sandbox %s: its device nodes: %w", sb.spec.ID, err)
		}
		return nil
	}
	return s, setup, nil
}

// mountPoints makes base hold the directories names and nothing else (an
// earlier start's faculties go), each mode 0755: the runtime binds from
// them as the sandbox's root. What is there already is left as it is.
func mountPoints(base string, names []string) error {
	mkdir := func(p string) error {
		err := os.Mkdir(p, 0o755)
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.Chmod(p, 0o755) // past the umask
	}
	if err := mkdir(base); err != nil {
		return err
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !slices.Contains(names, e.Name()) {
			if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil {
				return err
			}
		}
	}
	for _, name := range names {
		if err := mkdir(filepath.Join(base, name)); err != nil {
			return err
		}
	}
	return nil
}

func overlayNames(ovs []overlay) []string {
	names := make([]string, len(ovs))
	for i, o := range ovs {
		names[i] = o.name
	}
	return names
}

// mountOverlay mounts a read-only overlay of lower (over the empty
// directory: no upper layer needs two) at target.
func mountOverlay(lower, empty, target string) error {
	data := "lowerdir=" + escapeLayer(lower) + ":" + escapeLayer(empty) + "," + overlayOptions
	if err := unix.Mount("overlay", target, "overlay", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting an overlay of %s on %s: %w", lower, target, err)
	}
	return nil
}

// escapeLayer escapes what separates layers and options in overlayfs's
// mount data.
func escapeLayer(p string) string {
	return strings.NewReplacer(`\`, `\\`, `:`, `\:`, `,`, `\,`).Replace(p)
}

// devices are the nodes runc binds from the node's /dev into a container
// of a user namespace (its default devices), by name, type and number.
var devices = []struct {
	name         string
	major, minor uint32
}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}}

// mountDevices mounts a small tmpfs at dir with nodes of the devices, and
// binds each over the node's in /dev, for the runtime to bind into the
// container. The caller is in the runtime's mount namespace.
func mountDevices(dir string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=4k,nr_inodes=16"); err != nil {
		return err
	}
	for _, d := range devices {
		node, host := filepath.Join(dir, d.name), filepath.Join("/dev", d.name)
		if !backend.FileExists(host) {
			continue // the runtime fails on it, saying so
		}
		if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return err
		}
		// mknod applies the umask.
		if err := os.Chmod(node, 0o666); err != nil {
			return err
		}
		if err := unix.Mount(node, host, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	return nil
}

// inMountNamespace runs fn on an OS thread of its own in a mount namespace
// of its own: a copy of the agent's, which receives the node's mounts and
// propagates none back. Processes fn starts are in it; the thread ends
// with fn, and the namespace with the last of them.
func inMountNamespace(fn func() error) error {
	errc := make(chan error, 1)
	go mountNamespaceThread(fn, errc, nil)
	return <-errc
}

// mountNamespaceThread is inMountNamespace's goroutine; it closes locked
// once it holds its thread.
func mountNamespaceThread(fn func() error, errc chan<- error, locked chan<- struct{}) {
	// Never unlocked: the runtime ends the thread with this goroutine, so
	// that no other goroutine runs in the namespace.
	runtime.LockOSThread()
	if locked != nil {
		close(locked)
	}
	if unix.Gettid() == unix.Getpid() {
		// The main thread, which the runtime never ends (it would hold the
		// namespace, and what fn mounts, for the agent's life) and whose
		// namespace /proc/self shows: a goroutine on another thread takes
		// over, which cannot be given this one while it is held.
		next := make(chan struct{})
		go mountNamespaceThread(fn, errc, next)
		<-next
		runtime.UnlockOSThread()
		return
	}
	// CLONE_FS too: the thread's root and working directory are no
	// longer shared with the agent's other threads.
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		errc <- fmt.Errorf("oci: a mount namespace for the runtime: %w", err)
		return
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		errc <- fmt.Errorf("oci: a mount namespace for the runtime: %w", err)
		return
	}
	errc <- fn()
}

// checkOverlay says why this node cannot give sandboxes overlays, if it
// cannot: it mounts one, in a mount namespace of its own.
func (b *Backend) checkOverlay() error {
	tmp, err := os.MkdirTemp(b.opts.StateDir, ".overlay-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	err = inMountNamespace(func() error {
		return mountOverlay(filepath.Join(b.opts.StateDir, sharedDir), filepath.Join(b.opts.StateDir, emptyDir), tmp)
	})
	if err != nil {
		return fmt.Errorf("oci: sandboxes see the files they share through overlays of their own, and this node cannot mount one (overlayfs: see Host requirements in docs/isolation.md): %w", err)
	}
	return nil
}

// sharedFresh is how long a fingerprint of the node's /etc entries is
// taken to hold: a burst of starts reads them once a second, not once
// each (some hundreds of lstat calls, 1 to 3 ms).
const sharedFresh = time.Second

// sharedFor returns the snapshot of the node's /etc entries and the guest
// binary for sb's container, making it if the node's entries changed, and
// records it in sb's shared.ref, and the entries it holds. Snapshots that
// no sandbox names go when a new one is made.
func (b *Backend) sharedFor(sb *sandbox) (dir string, etc []string, err error) {
	b.sharedMu.Lock()
	defer b.sharedMu.Unlock()
	made := false
	if b.shared.name == "" || time.Since(b.shared.seen) >= sharedFresh {
		seen := time.Now()
		if b.shared.name, b.shared.etc, made, err = b.snapshotShared(); err != nil {
			b.shared.name = ""
			return "", nil, err
		}
		b.shared.seen = seen
	}
	name, etc := b.shared.name, b.shared.etc
	if err := writeRef(filepath.Join(sb.dir, sharedRef), name); err != nil {
		return "", nil, err
	}
	if made {
		b.gcShared(name)
	}
	return filepath.Join(b.opts.StateDir, sharedDir, name), etc, nil
}

// writeRef replaces the file p with name, unless it holds it already.
func writeRef(p, name string) error {
	return writeIfChanged(p, []byte(name+"\n"), 0o600)
}

// snapshotShared returns the name of the snapshot of the node's entries as
// they are now, and the entries it holds, making it (made) if there is
// none. The caller holds b.sharedMu.
func (b *Backend) snapshotShared() (name string, etc []string, made bool, err error) {
	root := filepath.Join(b.opts.StateDir, sharedDir)
	for range 3 {
		fp, etc, err := b.fingerprintShared()
		if err != nil {
			return "", nil, false, err
		}
		if backend.FileExists(filepath.Join(root, fp)) {
			return fp, etc, false, nil
		}
		tmp, err := os.MkdirTemp(root, ".new-")
		if err != nil {
			return "", nil, false, err
		}
		if err := b.copyShared(tmp, etc); err != nil {
			return "", nil, false, errors.Join(err, os.RemoveAll(tmp))
		}
		// The node's entries may have changed while they were copied:
		// the copy is kept under the fingerprint it was made from only if
		// that is still theirs.
		again, _, err := b.fingerprintShared()
		if err != nil || again != fp {
			_ = os.RemoveAll(tmp)
			if err != nil {
				return "", nil, false, err
			}
			continue
		}
		if err := os.Rename(tmp, filepath.Join(root, fp)); err != nil {
			return "", nil, false, errors.Join(err, os.RemoveAll(tmp))
		}
		return fp, etc, true, nil
	}
	return "", nil, false, errors.New("oci: the node's /etc entries kept changing while the agent copied them")
}

// fingerprintShared hashes what a snapshot is made of: the guest binary
// (its installed name holds its content's hash) and, of each host /etc
// entry that exists, every file's name, type, mode, owner, size, times
// and inode, and every link's target. Reading them costs some hundreds of
// lstat calls per start, where hashing the contents would read a MiB. A
// file rewritten in place at the same size within one tick of the
// kernel's clock after it was fingerprinted keeps its times, and is seen
// at its next change (ldconfig and update-ca-certificates replace their
// files by rename: a new inode).
func (b *Backend) fingerprintShared() (string, []string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "guest %s\n", filepath.Base(b.guestBin))
	var etc []string
	// The entries New found: the sandboxes' /etc has mount points for
	// them (prepareEtc).
	for _, e := range b.etcBinds {
		src := filepath.Join(b.opts.BaseRoot, "etc", e)
		// Stat, not Lstat: an entry that is a symlink (localtime) is
		// taken by its target, as a bind mount of it would be.
		fi, err := os.Stat(src)
		if err != nil {
			continue
		}
		etc = append(etc, e)
		fmt.Fprintf(h, "entry %q\n", e)
		hashInfo(h, ".", fi, "")
		if !fi.IsDir() {
			continue
		}
		err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == src {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			var target string
			if fi.Mode()&os.ModeSymlink != 0 {
				target, _ = os.Readlink(p)
			}
			hashInfo(h, rel, fi, target)
			return nil
		})
		if err != nil {
			return "", nil, fmt.Errorf("oci: reading the node's /etc/%s: %w", e, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], etc, nil
}

func hashInfo(h hash.Hash, rel string, fi fs.FileInfo, target string) {
	var buf [8 * 7]byte
	le := binary.LittleEndian
	le.PutUint64(buf[0:], uint64(fi.Mode()))
	le.PutUint64(buf[8:], uint64(fi.Size()))
	if st, ok := fi.Sys().(*unix.Stat_t); ok {
		le.PutUint64(buf[16:], uint64(st.Uid))
		le.PutUint64(buf[24:], uint64(st.Gid))
		le.PutUint64(buf[32:], st.Ino)
		le.PutUint64(buf[40:], uint64(st.Ctim.Nano()))
		le.PutUint64(buf[48:], uint64(st.Mtim.Nano()))
	}
	fmt.Fprintf(h, "%q %q ", rel, target)
	h.Write(buf[:])
}

// copyShared makes a snapshot in dir: etc/<entry> for each entry (copied,
// owners, modes and times kept; an entry that is a symlink by its
// target, links below it as links) and the guest binary, hard-linked.
func (b *Backend) copyShared(dir string, etc []string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, "etc"), 0o755); err != nil {
		return err
	}
	for _, e := range etc {
		dst := filepath.Join(dir, "etc", e)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyTree(filepath.Join(b.opts.BaseRoot, "etc", e), dst, true); err != nil {
			return fmt.Errorf("oci: copying the node's /etc/%s: %w", e, err)
		}
	}
	if err := os.Link(b.guestBin, filepath.Join(dir, sharedGuest)); err != nil {
		return fmt.Errorf("oci: the guest binary in a snapshot: %w", err)
	}
	return nil
}

// copyTree copies src to dst: files, directories and symlinks (follow:
// src itself by its target), with their owners, modes and times; other
// kinds of file are left out.
func copyTree(src, dst string, follow bool) error {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(src)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*unix.Stat_t)
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), false); err != nil {
				return err
			}
		}
	case fi.Mode().IsRegular():
		if err := copyFile(src, dst); err != nil {
			return err
		}
	default:
		return nil
	}
	if st != nil {
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		// After the owner: chown clears setuid and setgid bits.
		if err := os.Chmod(dst, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
			return err
		}
	}
	if st != nil {
		ts := []unix.Timespec{st.Atim, st.Mtim}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// gcShared removes the snapshots, and unfinished copies, that no sandbox
// names in its shared.ref, keep aside. The caller holds b.sharedMu.
func (b *Backend) gcShared(keep string) {
	used := map[string]bool{keep: true}
	sandboxes, _ := os.ReadDir(filepath.Join(b.opts.StateDir, "sandboxes"))
	for _, e := range sandboxes {
		if data, err := os.ReadFile(filepath.Join(b.opts.StateDir, "sandboxes", e.Name(), sharedRef)); err == nil {
			used[strings.TrimSpace(string(data))] = true
		}
	}
	root := filepath.Join(b.opts.StateDir, sharedDir)
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if !used[e.Name()] {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}

// etcMounts are the binds of the /etc entries of src.
func etcMounts(src sources) []mount {
	ms := make([]mount, 0, len(src.etc))
	for _, e := range src.etc {
		ms = append(ms, mount{Destination: filepath.Join("/etc", e), Type: "bind", Source: filepath.Join(src.etcDir, e), Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}})
	}
	return ms
}

// guestMount binds the guest binary of src.
func guestMount(src sources) mount {
	return mount{Destination: guestapi.Binary, Type: "bind", Source: src.guest, Options: []string{"bind", "ro", "nosuid", "nodev"}}
}
