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
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// PileDir implements backend.Backend: the directory of the pile's image,
// pile.img, an ext4 filesystem the guest mounts at /pile (synchronously:
// an append is on the image when it returns). PileFile reads a file of it.
func (b *Backend) PileDir(id string) string {
	return filepath.Join(b.sandboxDir(id), "pile")
}

// Bounds of the confined pile reader (pileFromImage).
const (
	pileReaderMemory  = 256 << 20
	pileReaderCPU     = 10 // seconds
	pileReaderTimeout = 30 * time.Second
)

// PileFile implements backend.PileReader: file name of sandbox id's pile,
// read without the host parsing the filesystem a guest wrote, which a
// tenant who became its guest's root could have crafted. A running VM's
// guest reads it (cat, as the tenant, over the guest protocol, as the
// read tool does); the host only counts bytes. Otherwise (stopped, not
// answering, or a retained pile) debugfs reads the image confined: as the
// sandbox's VM user (the image's group, which may read it; nothing else
// of the node's), in network, IPC, PID and UTS namespaces of its own,
// with no_new_privs, the guest's seccomp filter, bounded memory, CPU and
// time, no file it may write, and the image a read-only descriptor.
func (b *Backend) PileFile(id, name string) ([]byte, error) {
	if err := backend.ValidateID(id); err != nil {
		return nil, err
	}
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, "\"\\\n\x00") {
		return nil, fmt.Errorf("vm: pile file name %q", name)
	}
	if rec, err := b.load(id); err == nil {
		data, err := b.pileFromGuest(rec, name)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return data, err
		}
	}
	return b.pileFromImage(id, name)
}

// pileFromGuest has the running guest cat the file; an error when no VM
// runs or its guest does not answer.
func (b *Backend) pileFromGuest(rec *record, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.StartTimeout)
	defer cancel()
	v, err := b.running(ctx, rec, false)
	if err != nil {
		return nil, err
	}
	st, err := v.Open()
	if err != nil {
		return nil, err
	}
	path := guestapi.PileDir + "/" + name
	frames, err := guestexec.Encode(backend.ExecRequest{Command: "cat -- " + backend.ShellQuote(path), Shell: backend.ShellClean})
	if err != nil {
		st.Close()
		return nil, err
	}
	// A file is no larger than its filesystem.
	out := &boundedSink{limit: rec.Storage.PileBytes}
	p, err := guestexec.Start(ctx, st, frames, out, backend.GuestHooks{})
	if err != nil {
		return nil, err
	}
	status, err := p.Wait(ctx)
	if err != nil {
		return nil, err
	}
	stdout, stderr, over := out.result()
	switch {
	case over:
		return nil, fmt.Errorf("vm: the guest of %s sent more than its pile's %d bytes for %s", rec.Spec.ID, rec.Storage.PileBytes, name)
	case status.ExitCode == 0:
		return stdout, nil
	case bytes.Contains(stderr, []byte("No such file")):
		return nil, fmt.Errorf("vm: %s is not in the pile of %s: %w", name, rec.Spec.ID, os.ErrNotExist)
	}
	return nil, fmt.Errorf("vm: reading %s in the guest of %s: exit %d: %s", path, rec.Spec.ID, status.ExitCode, bytes.TrimSpace(stderr))
}

// pileFromImage runs debugfs over the pile's image, confined (PileFile).
func (b *Backend) pileFromImage(id, name string) ([]byte, error) {
	img := filepath.Join(b.PileDir(id), pileImage)
	f, err := os.OpenFile(img, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	// A file is no larger than its filesystem's image.
	stdout := &limitedBuffer{limit: st.Size}
	// -c: catastrophic mode, read-only, without the bitmaps.
	stderr, err := b.debugfsConfined(f, &st, nil, false, nil, stdout, "-c", "-R", "cat \"/"+name+"\"")
	if err != nil {
		return nil, fmt.Errorf("vm: reading %s from %s (confined debugfs): %v: %s", name, img, err, bytes.TrimSpace(stderr))
	}
	if stdout.over {
		return nil, fmt.Errorf("vm: debugfs printed more than %s's %d bytes for %s", img, st.Size, name)
	}
	// debugfs reports a missing file on stderr and exits 0.
	if bytes.Contains(stderr, []byte("File not found")) {
		return nil, fmt.Errorf("vm: %s is not in the pile of %s: %w", name, id, os.ErrNotExist)
	}
	return stdout.Bytes(), nil
}

// debugfsConfined runs debugfs with args, then the image's name, over
// img (st its status) confined as PileFile says. files are passed on as
// descriptors 4 on, for args to name as /proc/self/fd/N; stdin is
// debugfs's. write lets it write the image in place (the pile writer),
// and no other regular file, nor past the image's end; the image must be
// writable by its user for it to open it so. It returns what debugfs
// said on stderr (up to 64 KiB).
func (b *Backend) debugfsConfined(img *os.File, st *unix.Stat_t, files []*os.File, write bool, stdin []byte, stdout *limitedBuffer, args ...string) ([]byte, error) {
	// The guest binary too is passed open: the confined user need not
	// reach its directory.
	self, err := os.Open(b.opts.GuestBinary)
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	defer self.Close()
	fsize := int64(0)
	if write {
		fsize = st.Size
	}
	selfFD := 4 + len(files)
	ctx, cancel := context.WithTimeout(context.Background(), pileReaderTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/fd/"+strconv.Itoa(selfFD),
		append([]string{
			guestapi.ConfineMode, "-fds", strconv.Itoa(selfFD), "-as", strconv.Itoa(pileReaderMemory), "-cpu", strconv.Itoa(pileReaderCPU),
			"-fsize", strconv.FormatInt(fsize, 10), b.debugfs,
		}, append(args, "/proc/self/fd/3")...)...)
	cmd.Args[0] = "playground-sandbox"
	cmd.ExtraFiles = append(append([]*os.File{img}, files...), self)
	cmd.Dir = "/"
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if b.dropped {
		gid := st.Gid
		if gid <= b.opts.UIDBase || gid >= b.opts.UIDBase+uidSlots {
			return nil, fmt.Errorf("vm: %s belongs to group %d, not to a VM user of this agent's (%d to %d): provision its sandbox again to read it", img.Name(), gid, b.opts.UIDBase+1, b.opts.UIDBase+uidSlots-1)
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: gid, Gid: gid, Groups: []uint32{}}
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS
	}
	stderr := &limitedBuffer{limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	err = cmd.Run()
	return stderr.Bytes(), err
}

// limitedBuffer keeps the first limit bytes written to it and notes that
// more came.
type limitedBuffer struct {
	bytes.Buffer
	limit int64
	over  bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := l.limit - int64(l.Len()); int64(n) > room {
		l.over = true
		p = p[:max(room, 0)]
	}
	l.Buffer.Write(p)
	return n, nil
}

// boundedSink collects a command's stdout up to limit bytes and the first
// 64 KiB of its stderr.
type boundedSink struct {
	mu             sync.Mutex
	limit          int64
	stdout, stderr limitedBuffer
	over           bool
}

func (s *boundedSink) Write(stream backend.Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stream == backend.Stdout {
		s.stdout.limit = s.limit
		_, _ = s.stdout.Write(p)
		s.over = s.over || s.stdout.over
		return
	}
	s.stderr.limit = 64 << 10
	_, _ = s.stderr.Write(p)
}

func (s *boundedSink) result() (stdout, stderr []byte, over bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stdout.Bytes(), s.stderr.Bytes(), s.over
}
