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

package guest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// fileRoots are the directories a file call resolves against: the
// tenant's home (a relative cwd's base) and the pile it refuses to write.
// The guest's are guestapi's; a test gives its own.
type fileRoots struct {
	home, pile string
}

// serveFile serves a file call (guestapi.FileRequest) with the tenant's
// credentials, and answers it: a File frame, then a read's bytes.
func (s *shepherd) serveFile(req guestapi.StartRequest, data []byte) {
	roots := fileRoots{home: tenantHome, pile: guestapi.PileDir}
	var (
		ans  guestapi.FileAnswer
		body []byte
		err  error
	)
	if terr := asTenant(guestapi.FileThreadName(req.File.Op), func() { ans, body, err = roots.serve(req.Cwd, *req.File, data, s.agentGone) }); terr != nil {
		err = terr
	}
	if err != nil {
		s.sendError(err.Error())
		return
	}
	ans.Len = len(body)
	f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameFile, ans)
	if err != nil {
		s.sendError(err.Error())
		return
	}
	s.send(f)
	// The bytes go out as they are, in frames as large as the protocol
	// allows: one header each, no copy.
	for len(body) > 0 && !s.lost {
		n := min(len(body), guestapi.MaxFrame)
		var hdr [guestapi.HeaderSize]byte
		hdr[0] = byte(guestapi.FrameStdout)
		binary.BigEndian.PutUint32(hdr[1:], uint32(n))
		s.send(hdr[:])
		s.send(body[:n])
		body = body[n:]
	}
}

// agentGone reports whether the agent closed its connection: a long
// digest stops then, as a command is killed.
func (s *shepherd) agentGone() bool {
	pfd := []unix.PollFd{{Fd: int32(s.conn), Events: unix.POLLIN | unix.POLLRDHUP}}
	n, err := unix.Poll(pfd, 0)
	return err == nil && n > 0 && pfd[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
}

// fileThreadDone is the name of a file call's thread once the call is done,
// as it ends.
const fileThreadDone = "pg-file-done"

// asTenant runs fn on an OS thread of its own, named name, whose
// credentials are the tenant's (no supplementary groups, and effective IDs whose change from
// root drops every capability), so that what fn opens, creates and
// renames is checked as the tenant's shell would be. The credentials are
// the thread's alone (the raw system calls, unlike Go's, change only the
// calling thread), and the thread ends with fn: it is never unlocked, so
// the runtime runs nothing else on it and does not start threads from
// it. The shepherd stays root for its next command.
func asTenant(name string, fn func()) error {
	done := make(chan error, 1)
	// Owned by asTenant, which waits for it.
	go func() {
		runtime.LockOSThread()
		if err := tenantThread(); err != nil {
			done <- fmt.Errorf("taking the tenant's credentials for a file call: %w", err)
			return
		}
		setThreadName(name)
		fn()
		setThreadName(fileThreadDone)
		done <- nil
	}()
	return <-done
}

// tenantThread gives the calling thread the tenant's credentials, keeping
// root as its real and saved IDs.
func tenantThread() error {
	const keep = ^uintptr(0) // -1: leave this ID as it is
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(tenantGID), keep); e != 0 {
		return fmt.Errorf("setresgid: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(tenantUID), keep); e != 0 {
		return fmt.Errorf("setresuid: %w", e)
	}
	return nil
}

// setThreadName names the calling thread (PR_SET_NAME: its comm).
func setThreadName(name string) {
	b, err := unix.BytePtrFromString(name)
	if err == nil {
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(b)), 0, 0, 0) //nolint:gosec // prctl(2) takes the name by address; b outlives the call
	}
}

// refused is a file call's refusal.
func refused(r filecall.Refusal, detail string) (guestapi.FileAnswer, []byte, error) {
	return guestapi.FileAnswer{Refused: r, Detail: detail}, nil, nil
}

// serve does a file call: the path resolves as a command's would, run in
// cwd; the kernel follows its links and its "..".
func (r fileRoots) serve(cwd string, req guestapi.FileRequest, data []byte, gone func() bool) (guestapi.FileAnswer, []byte, error) {
	switch {
	case req.Path == "" || strings.IndexByte(req.Path, 0) >= 0:
		return guestapi.FileAnswer{}, nil, errors.New("the path is empty or holds a NUL byte")
	case len(req.Path) > guestapi.MaxFilePath:
		return guestapi.FileAnswer{}, nil, fmt.Errorf("the path is %d bytes long (limit %d)", len(req.Path), guestapi.MaxFilePath)
	case req.Offset < 0:
		return guestapi.FileAnswer{}, nil, fmt.Errorf("offset %d is negative", req.Offset)
	case req.Length < 0 || req.Length > guestapi.MaxStdin:
		return guestapi.FileAnswer{}, nil, fmt.Errorf("length %d is out of range: 0 to %d", req.Length, guestapi.MaxStdin)
	}
	base := cwd
	switch {
	case base == "":
		base = r.home
	case !filepath.IsAbs(base):
		base = r.home + "/" + base
	}
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		if err == nil {
			err = unix.ENOTDIR
		}
		return guestapi.FileAnswer{}, nil, startError(base, cwd != "", err)
	}
	p := req.Path
	if !filepath.IsAbs(p) {
		// Not cleaned: "a/link/.." is the link target's parent, as the
		// kernel resolves it for a command.
		p = base + "/" + p
	}
	switch req.Op {
	case filecall.Read:
		return r.read(p, req)
	case filecall.Digest:
		return r.digest(p, gone)
	case filecall.Write:
		return r.replace(p, req.Path, data)
	case filecall.WriteAt, filecall.Append:
		return r.writeRange(p, req, data)
	}
	return guestapi.FileAnswer{}, nil, fmt.Errorf("unknown file call %q", req.Op)
}

// split is dirname(1) and basename(1) of p: trailing slashes are no part
// of either.
func split(p string) (dir, name string) {
	t := strings.TrimRight(p, "/")
	if t == "" {
		return "/", "/"
	}
	i := strings.LastIndexByte(t, '/')
	switch {
	case i < 0:
		return ".", t
	case i == 0:
		return "/", t[1:]
	}
	if d := strings.TrimRight(t[:i], "/"); d != "" {
		return d, t[i+1:]
	}
	return "/", t[i+1:]
}

// resolved is p with its directory's links resolved: the path an answer
// names the file by, for any cwd. p itself when that fails.
func resolved(p string) string {
	dir, name := split(p)
	d, err := filepath.EvalSymlinks(dir)
	if err != nil || !filepath.IsAbs(d) {
		return p
	}
	return strings.TrimSuffix(d, "/") + "/" + name
}

// inDir reports whether p is dir or under it.
func inDir(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// openRegular opens p for reading when it is a regular file, or a link
// to one: never a FIFO or device, whose open alone may block or act.
func openRegular(p string) (*os.File, os.FileInfo, filecall.Refusal, error) {
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		// As test -e has it: no file there to read.
		return nil, nil, filecall.NoFile, nil
	case err != nil:
		return nil, nil, "", err
	case !fi.Mode().IsRegular():
		return nil, nil, filecall.NotRegular, nil
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, filecall.NoFile, nil
	}
	if err != nil {
		return nil, nil, "", err
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, nil, "", err
		}
		return nil, nil, filecall.NotRegular, nil // replaced meanwhile
	}
	return f, fi, "", nil
}

// read reads req.Length bytes from req.Offset, or the whole file.
func (r fileRoots) read(p string, req guestapi.FileRequest) (guestapi.FileAnswer, []byte, error) {
	f, fi, why, err := openRegular(p)
	if why != "" || err != nil {
		return guestapi.FileAnswer{Refused: why}, nil, err
	}
	defer f.Close()
	size := fi.Size()
	if req.Whole {
		if size > int64(req.Length) {
			return refused(filecall.TooLarge, strconv.FormatInt(size, 10))
		}
		// Past the size, one byte more than the bound tells a file that
		// grew past it.
		var b bytes.Buffer
		b.Grow(int(size) + bytes.MinRead)
		if _, err := b.ReadFrom(io.LimitReader(f, int64(req.Length)+1)); err != nil {
			return guestapi.FileAnswer{}, nil, err
		}
		buf, n := b.Bytes(), b.Len()
		if n > req.Length {
			return refused(filecall.Grew, "")
		}
		return guestapi.FileAnswer{Path: resolved(p), Size: int64(n)}, buf[:n], nil
	}
	if req.Offset >= size {
		return guestapi.FileAnswer{Path: resolved(p), Size: size}, nil, nil
	}
	buf := make([]byte, min(int64(req.Length), size-req.Offset))
	n, err := f.ReadAt(buf, req.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return guestapi.FileAnswer{}, nil, err
	}
	if n < len(buf) {
		// It shrank while it was read.
		return refused(filecall.Short, fmt.Sprintf("%d of its %d", req.Offset+int64(n), size))
	}
	if n == len(buf) && n < req.Length {
		// Read on to the bound: the file may have grown since its stat.
		more := make([]byte, req.Length-n)
		m, err := f.ReadAt(more, req.Offset+int64(n))
		if err != nil && !errors.Is(err, io.EOF) {
			return guestapi.FileAnswer{}, nil, err
		}
		buf = append(buf, more[:m]...)
		size = max(size, req.Offset+int64(len(buf)))
	}
	return guestapi.FileAnswer{Path: resolved(p), Size: size}, buf, nil
}

// digestCheck is how many bytes a digest reads between two looks at
// whether the agent still waits for it.
const digestCheck = 16 << 20

// digest answers the size and sha256 of the whole file; a size that
// differs after the hash means a writer was at work meanwhile.
func (r fileRoots) digest(p string, gone func() bool) (guestapi.FileAnswer, []byte, error) {
	f, fi, why, err := openRegular(p)
	if why != "" || err != nil {
		return guestapi.FileAnswer{Refused: why}, nil, err
	}
	defer f.Close()
	h := sha256.New()
	for {
		n, err := io.CopyN(h, f, digestCheck)
		if err != nil && !errors.Is(err, io.EOF) {
			return guestapi.FileAnswer{}, nil, err
		}
		if n < digestCheck {
			break
		}
		if gone != nil && gone() {
			return guestapi.FileAnswer{}, nil, errors.New("the agent stopped waiting for the digest")
		}
	}
	after, err := f.Stat()
	if err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	if after.Size() != fi.Size() {
		return refused(filecall.Changed, "")
	}
	return guestapi.FileAnswer{Path: resolved(p), Size: fi.Size(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil, nil
}

// writeTarget checks the directory a write names: it exists, the path is
// no directory, and the directory, its links resolved, is not the pile's.
// given is the path as the agent gave it, for the refusal's detail.
func (r fileRoots) writeTarget(p, given string) (realDir, name string, why filecall.Refusal, detail string) {
	dir, name := split(p)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		gdir, _ := split(given)
		return "", "", filecall.NoDir, gdir
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return "", "", filecall.IsDir, ""
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		gdir, _ := split(given)
		return "", "", filecall.NoDir, gdir
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(r.home, d)
	}
	if inDir(d, r.pile) {
		return "", "", filecall.InPile, ""
	}
	return d, name, "", ""
}

// replace writes data to a temporary file in p's directory, syncs it and
// renames it over p: a reader sees the old file or the new one.
func (r fileRoots) replace(p, given string, data []byte) (guestapi.FileAnswer, []byte, error) {
	d, name, why, detail := r.writeTarget(p, given)
	if why != "" {
		return refused(why, detail)
	}
	dir, _ := split(p)
	t, err := os.CreateTemp(dir, ".playground-write.")
	if err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	done := false
	defer func() {
		if !done {
			t.Close()
			os.Remove(t.Name())
		}
	}()
	if _, err := t.Write(data); err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	if fi, err := os.Stat(p); err == nil {
		_ = t.Chmod(fi.Mode().Perm()) // the old file's mode, as far as it is the tenant's to give
	}
	if err := t.Sync(); err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	if err := t.Close(); err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	if err := os.Rename(t.Name(), dir+"/"+name); err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	done = true
	return guestapi.FileAnswer{Path: strings.TrimSuffix(d, "/") + "/" + name, Size: int64(len(data))}, nil, nil
}

// maxLinks bounds the links a ranged write follows, as Linux's
// MAXSYMLINKS.
const maxLinks = 40

// linkTarget is where p's links lead, as readlink -f says: every link
// followed, the last one's target possibly missing.
func linkTarget(p string) (string, error) {
	for range maxLinks {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) || (err == nil && fi.Mode()&fs.ModeSymlink == 0):
			return p, nil // no link (left): where it leads, missing or not
		case err != nil:
			return "", err
		}
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Dir(p) + "/" + t
		}
		dir, name := split(t)
		d, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return "", err
		}
		p = strings.TrimSuffix(d, "/") + "/" + name
	}
	return "", unix.ELOOP
}

// writeRange writes data at req.Offset, or appends it, creating the file
// and never truncating it. The pile is refused by the directory the file
// is in, and by the one its links lead to: appending through a link
// would reach it.
func (r fileRoots) writeRange(p string, req guestapi.FileRequest, data []byte) (guestapi.FileAnswer, []byte, error) {
	d, name, why, detail := r.writeTarget(p, req.Path)
	if why != "" {
		return refused(why, detail)
	}
	if fi, err := os.Stat(p); err == nil && !fi.Mode().IsRegular() {
		return refused(filecall.NotRegular, "")
	}
	t, err := linkTarget(p)
	if err != nil {
		return refused(filecall.NotRegular, "")
	}
	if td, _ := split(t); inDir(td, r.pile) || inDir(t, r.pile) {
		return refused(filecall.InPile, "")
	}
	flags := os.O_WRONLY | os.O_CREATE | unix.O_NONBLOCK | unix.O_NOCTTY
	if req.Op == filecall.Append {
		flags |= os.O_APPEND
	}
	f, err := os.OpenFile(p, flags, 0o666)
	if err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		if err != nil {
			return guestapi.FileAnswer{}, nil, err
		}
		return refused(filecall.NotRegular, "")
	}
	if req.Op == filecall.Append {
		_, err = f.Write(data)
	} else {
		_, err = f.WriteAt(data, req.Offset)
	}
	if err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return guestapi.FileAnswer{}, nil, err
	}
	return guestapi.FileAnswer{Path: strings.TrimSuffix(d, "/") + "/" + name, Size: fi.Size()}, nil, nil
}
