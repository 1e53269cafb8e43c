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

package imagestore

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// A layer is hostile input: its author chooses every name, link, mode and
// owner in it, and how far it expands. unpack applies one layer's tar
// stream to an empty directory by the OCI image spec's rules, as an
// overlayfs lower layer (a whiteout becomes a 0/0 character device, an
// opaque directory the trusted.overlay.opaque xattr), and:
//
//   - refuses a name that is absolute or has a ".." component, a hard link
//     whose target is not a regular file already unpacked from this layer,
//     an entry under a symbolic link or under a file, and an entry type the
//     spec does not know;
//   - never follows a symbolic link: a link is written as it is, and its
//     target, absolute or not, is resolved at run time inside the sandbox's
//     root, never by the node;
//   - neutralises, and says so: setuid and setgid bits (removed), device
//     nodes (dropped: a sandbox's /dev is the runtime's), file capabilities
//     (security.capability, dropped with every other xattr), owners outside
//     0–65535 (made 65534, "nobody");
//   - stops past its bounds (bytes written, entries), so a small layer
//     cannot expand without limit.

// Refusal reasons: why a layer, and with it its image, was refused. Each is
// a reason a Sandbox's condition carries, defined with the API's.
const (
	ReasonPathEscapes    = playgroundv1alpha1.ReasonImagePathEscapes
	ReasonLinkEscapes    = playgroundv1alpha1.ReasonImageLinkEscapes
	ReasonThroughLink    = playgroundv1alpha1.ReasonImageThroughLink
	ReasonUnsupported    = playgroundv1alpha1.ReasonImageUnsupported
	ReasonTooLarge       = playgroundv1alpha1.ReasonImageTooLarge
	ReasonTooManyEntries = playgroundv1alpha1.ReasonImageTooManyEntries
	ReasonDigestMismatch = playgroundv1alpha1.ReasonImageDigestMismatch
	ReasonMalformed      = playgroundv1alpha1.ReasonImageMalformed
)

// RefusedError is a layer or image the store will not unpack, with the
// reason and the entry that made it.
type RefusedError struct {
	Reason string
	Entry  string
	Detail string
}

func (e *RefusedError) Error() string {
	if e.Entry == "" {
		return fmt.Sprintf("image refused (%s): %s", e.Reason, e.Detail)
	}
	return fmt.Sprintf("image refused (%s): %q: %s", e.Reason, e.Entry, e.Detail)
}

func refused(reason, entry, format string, args ...any) error {
	return &RefusedError{Reason: reason, Entry: entry, Detail: fmt.Sprintf(format, args...)}
}

// maxID is the highest owner a layer's file may keep: a sandbox's user
// namespace maps 65536 IDs.
const maxID = 65535

// nobody is the owner given to a file whose owner is past maxID.
const nobody = 65534

// maxNotes bounds the neutralisations a layer's record keeps; the count
// past it is kept as a number.
const maxNotes = 32

// layerLimits bounds what one layer may write.
type layerLimits struct {
	bytes   int64
	entries int
}

// unpacked is what unpack reports of a layer.
type unpacked struct {
	// Notes are the neutralisations made, at most maxNotes of them.
	Notes []string
	// MoreNotes counts the neutralisations past Notes.
	MoreNotes int
	// Entries is how many tar entries the layer had.
	Entries int
}

func (u *unpacked) notef(format string, args ...any) {
	if len(u.Notes) < maxNotes {
		u.Notes = append(u.Notes, fmt.Sprintf(format, args...))
		return
	}
	u.MoreNotes++
}

// unpack applies the tar stream r to dir, which exists and is empty.
func unpack(dir string, r io.Reader, lim layerLimits) (unpacked, error) {
	var (
		out     unpacked
		written int64
	)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, refused(ReasonMalformed, "", "reading the layer's tar stream: %v", err)
		}
		out.Entries++
		if out.Entries > lim.entries {
			return out, refused(ReasonTooManyEntries, hdr.Name, "the layer has more than %d entries", lim.entries)
		}
		// Every entry costs a block of metadata, so a layer of empty
		// files is bounded too.
		written += 512
		if hdr.Typeflag == tar.TypeReg {
			written += hdr.Size
		}
		if written > lim.bytes {
			return out, refused(ReasonTooLarge, hdr.Name, "the layer expands past %d bytes", lim.bytes)
		}
		if err := apply(dir, hdr, tr, &out); err != nil {
			return out, err
		}
	}
}

// clean returns an entry's name as a relative, clean path, or a refusal.
func clean(name string) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", refused(ReasonPathEscapes, name, "an absolute name")
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", refused(ReasonPathEscapes, name, "a name with a \"..\" component")
		}
	}
	return path.Clean(name), nil
}

// parent makes the directories above rel in dir, as the layer's own
// directories would (0755, root), refusing to pass through anything but a
// directory: a symbolic link is never followed, and a file is no parent.
func parent(dir, rel string) error {
	p := dir
	comps := strings.Split(path.Dir(rel), "/")
	if path.Dir(rel) == "." {
		return nil
	}
	for _, c := range comps {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("making %s: %w", rel, err)
			}
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return refused(ReasonThroughLink, rel, "its parent %s is a symbolic link of this layer", strings.TrimPrefix(p, dir+"/"))
		case !fi.IsDir():
			return refused(ReasonMalformed, rel, "its parent %s is not a directory", strings.TrimPrefix(p, dir+"/"))
		}
	}
	return nil
}

// clearPath removes what is at p, unless it is a directory and keepDir says a
// directory may stay (a later entry of a directory updates its metadata).
func clearPath(p string, keepDir bool) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if keepDir && fi.IsDir() {
		return nil
	}
	return os.RemoveAll(p)
}

func apply(dir string, hdr *tar.Header, r io.Reader, out *unpacked) error {
	rel, err := clean(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "." {
		// The layer's root: the directory itself.
		return nil
	}
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		// PAX global headers carry defaults for the entries after them,
		// which the tar reader applies: nothing to write.
		return nil
	}
	if err := parent(dir, rel); err != nil {
		return err
	}
	target := filepath.Join(dir, rel)
	base := path.Base(rel)

	// Whiteouts, in overlayfs's own form.
	if base == ".wh..wh..opq" {
		return unix.Lsetxattr(filepath.Dir(target), "trusted.overlay.opaque", []byte("y"), 0)
	}
	if name, ok := strings.CutPrefix(base, ".wh."); ok {
		if name == "" || name == "." {
			return refused(ReasonMalformed, hdr.Name, "a whiteout that names nothing")
		}
		wh := filepath.Join(filepath.Dir(target), name)
		if err := clearPath(wh, false); err != nil {
			return err
		}
		return unix.Mknod(wh, unix.S_IFCHR, 0)
	}

	mode := uint32(hdr.Mode) & 0o7777
	if mode&(unix.S_ISUID|unix.S_ISGID) != 0 && hdr.Typeflag != tar.TypeDir {
		out.notef("%s: setuid/setgid removed", rel)
	}
	mode &^= unix.S_ISUID | unix.S_ISGID
	for k := range hdr.PAXRecords {
		if k == "SCHILY.xattr.security.capability" {
			out.notef("%s: file capabilities removed", rel)
		}
	}

	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := clearPath(target, true); err != nil {
			return err
		}
		if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case tar.TypeReg:
		if err := clearPath(target, false); err != nil {
			return err
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		// The size was counted against the layer's bound before; tar's
		// reader gives no more than the header's size.
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return refused(ReasonMalformed, hdr.Name, "reading its content: %v", err)
		}
	case tar.TypeSymlink:
		if err := clearPath(target, false); err != nil {
			return err
		}
		if err := os.Symlink(hdr.Linkname, target); err != nil {
			return err
		}
	case tar.TypeLink:
		src, err := clean(hdr.Linkname)
		if err != nil {
			return refused(ReasonLinkEscapes, hdr.Name, "a hard link to %q, outside the layer", hdr.Linkname)
		}
		srcPath := filepath.Join(dir, src)
		if err := beneath(dir, src); err != nil {
			return err
		}
		fi, err := os.Lstat(srcPath)
		if err != nil || !fi.Mode().IsRegular() {
			return refused(ReasonLinkEscapes, hdr.Name, "a hard link to %q, which is not a regular file of this layer", hdr.Linkname)
		}
		if srcPath == target {
			return nil
		}
		if err := clearPath(target, false); err != nil {
			return err
		}
		// A hard link shares its target's inode: its mode and owner are
		// the target's, set when the target was written.
		return os.Link(srcPath, target)
	case tar.TypeChar, tar.TypeBlock:
		out.notef("%s: device node dropped", rel)
		return nil
	case tar.TypeFifo:
		if err := clearPath(target, false); err != nil {
			return err
		}
		if err := unix.Mkfifo(target, 0o600); err != nil {
			return err
		}
	default:
		return refused(ReasonUnsupported, hdr.Name, "entry type %q is not a file, directory, link, device or fifo", hdr.Typeflag)
	}

	uid, gid := hdr.Uid, hdr.Gid
	if uid < 0 || uid > maxID || gid < 0 || gid > maxID {
		out.notef("%s: owner %d:%d outside 0-%d made %d", rel, uid, gid, maxID, nobody)
		if uid < 0 || uid > maxID {
			uid = nobody
		}
		if gid < 0 || gid > maxID {
			gid = nobody
		}
	}
	if err := os.Lchown(target, uid, gid); err != nil {
		return err
	}
	if hdr.Typeflag != tar.TypeSymlink {
		// Chmod after chown: chown clears setuid bits, and there are none
		// left to clear; the mode is the entry's, without the umask.
		if err := os.Chmod(target, fs.FileMode(mode&0o777)|modeBits(mode)); err != nil {
			return err
		}
	}
	mt := hdr.ModTime
	if mt.IsZero() {
		mt = time.Unix(0, 0)
	}
	ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, target, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// blocks is the disk a file takes, in bytes of allocated blocks.
func blocks(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*unix.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// modeBits is the sticky bit of a unix mode as an fs.FileMode.
func modeBits(mode uint32) fs.FileMode {
	if mode&unix.S_ISVTX != 0 {
		return fs.ModeSticky
	}
	return 0
}

// beneath refuses a path of dir that passes through a symbolic link or a
// file: a hard link's target is looked up without following links.
func beneath(dir, rel string) error {
	p := dir
	comps := strings.Split(rel, "/")
	for _, c := range comps[:len(comps)-1] {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			return refused(ReasonLinkEscapes, rel, "a hard link's target passes through %s, not a directory of this layer", strings.TrimPrefix(p, dir+"/"))
		}
	}
	return nil
}
