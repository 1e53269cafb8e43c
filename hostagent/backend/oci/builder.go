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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Builders. A build runs in a throwaway sandbox of this backend, made the
// way a tenant's is (same base, /etc, user namespace, seccomp filter,
// cgroup limits, a network namespace with loopback only) but with no pile,
// the source bound read-only at /src and /out on its writable layer. The
// command runs as the sandbox user in a clean shell, in /out. When it
// succeeds, the regular files and directories of /out are copied into the
// request's Out, owned by the agent; then the sandbox goes, container,
// cgroups, files, mounts and loop devices, whatever the outcome.
//
// Why /out is on the layer and copied rather than Out bound in: the
// layer's image bounds what a build can write (Storage.LayerBytes and
// LayerInodes), where a bound host directory would let it fill the node;
// and the copy is made once the container is gone, so no process of the
// build can race it, and it follows no link (symbolic links, devices and
// other special files are left behind; hard links come back as copies, of
// files that were on the image anyway).

const (
	buildSrcDir = "/src"
	buildOutDir = "/out"
	// buildOut is /out's directory on a builder's writable layer.
	buildOut = "out"
	// buildersDir (in the state directory) has an entry per builder that
	// exists, so that a new agent finds what an agent that died mid-build
	// left without reading every sandbox's definition.
	buildersDir = "builders"
)

// DefaultBuildTimeout bounds a build whose request sets no Timeout.
const DefaultBuildTimeout = 10 * time.Minute

var _ backend.Builder = (*Backend)(nil)

// Build implements backend.Builder. The error is nil when the command ran
// (whatever its exit status); it is not when the builder could not run it,
// when ctx ended (the build killed and removed), or when the builder could
// not be removed.
func (b *Backend) Build(ctx context.Context, req backend.BuildRequest) (res backend.BuildResult, err error) {
	if err := b.validateBuild(req); err != nil {
		return res, err
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultBuildTimeout
	}
	spec := backend.Spec{ID: req.ID, Tenant: "builder/" + req.ID, Resources: req.Resources, Storage: b.storage(req.Storage)}
	if err := validateSpecFields(spec); err != nil {
		return res, err
	}
	if err := validateStorage(spec.Storage); err != nil {
		return res, err
	}
	defer b.locks.Lock(req.ID)()
	switch sb, err := b.load(req.ID); {
	case err == nil && !sb.builder:
		return res, fmt.Errorf("oci: %s is a tenant's sandbox, not a builder: a build needs an ID of its own", req.ID)
	case err == nil:
		// Left by an agent that died mid-build.
		if err := b.removeBuilder(ctx, req.ID); err != nil {
			return res, err
		}
	case !errors.Is(err, backend.ErrNotFound):
		return res, err
	}
	if err := b.checkReserve(); err != nil {
		return res, err
	}
	marker := filepath.Join(b.opts.StateDir, buildersDir, req.ID)
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return res, fmt.Errorf("oci: build %s: %w", req.ID, err)
	}
	defer func() {
		// Whatever happened, ctx ended or not: the builder goes.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if rerr := b.removeBuilder(cctx, req.ID); rerr != nil {
			err = errors.Join(err, rerr)
		}
		// A step that ctx cut short (mkfs killed, say) reports its own
		// failure; the caller learns that ctx ended it.
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("oci: build %s: %w (%w)", req.ID, ctx.Err(), err)
		}
	}()
	sb, err := b.allocate(spec, true, false)
	if err != nil {
		return res, err
	}
	sb.source = req.Source
	if err := b.start(ctx, sb); err != nil {
		return res, err
	}

	log := &tailSink{max: backend.MaxBuildLog}
	proc, err := b.Exec(ctx, req.ID, backend.ExecRequest{
		Command: shellCommand(req.Command),
		Shell:   backend.ShellClean,
		Cwd:     buildOutDir,
	}, log)
	if err != nil {
		return res, fmt.Errorf("oci: build %s: %w", req.ID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, werr := proc.Wait(wctx)
	if werr != nil && wctx.Err() != nil {
		// Past the timeout, or ctx ended: kill it. Removing the container
		// below ends whatever the kill could not prove gone.
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), guestapi.ProofTimeout+5*time.Second)
		_ = proc.Kill(kctx)
		st, _ = proc.Wait(kctx)
		kcancel()
		st.Killed = true
		if st.ExitCode == 0 && st.Signal == "" {
			st.ExitCode = -1
		}
		werr = nil
	}
	res.Exit, res.Log = st, log.bytes()
	if werr != nil {
		return res, fmt.Errorf("oci: build %s: %w", req.ID, werr)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("oci: build %s: %w", req.ID, ctx.Err())
	}
	// No process of the build may run while its output is read.
	if err := b.removeContainer(ctx, req.ID); err != nil {
		return res, fmt.Errorf("oci: build %s: removing its container: %w", req.ID, err)
	}
	if st.ExitCode != 0 || st.Killed {
		return res, nil
	}
	if err := copyOut(filepath.Join(sb.dir, layerName, buildOut), req.Out, spec.Storage.LayerBytes); err != nil {
		return res, fmt.Errorf("oci: build %s: handing /out back: %w", req.ID, err)
	}
	return res, nil
}

// validateBuild checks a request before anything is made for it.
func (b *Backend) validateBuild(req backend.BuildRequest) error {
	if err := backend.ValidateID(req.ID); err != nil {
		return err
	}
	if len(req.Command) == 0 {
		return fmt.Errorf("oci: build %s has no command", req.ID)
	}
	for _, a := range req.Command {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("oci: build %s: an argument of its command contains a NUL byte", req.ID)
		}
	}
	if n := len(shellCommand(req.Command)); n > bounds.MaxCommandBytes {
		return fmt.Errorf("oci: build %s: %s", req.ID, bounds.CommandTooLong(n))
	}
	if req.Timeout < 0 {
		return fmt.Errorf("oci: build %s: negative timeout", req.ID)
	}
	if !filepath.IsAbs(req.Source) || !filepath.IsAbs(req.Out) {
		return fmt.Errorf("oci: build %s: its source and output must be absolute paths", req.ID)
	}
	if err := checkReachable(filepath.Clean(req.Source)); err != nil {
		return fmt.Errorf("oci: build %s: its source: %w", req.ID, err)
	}
	entries, err := os.ReadDir(req.Out)
	if err != nil {
		return fmt.Errorf("oci: build %s: its output directory: %w", req.ID, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("oci: build %s: its output directory %s is not empty", req.ID, req.Out)
	}
	return nil
}

// shellCommand is argv as the text of a /bin/sh -c that runs it: each
// argument single-quoted, so the shell expands nothing, and exec'd, so the
// exit status is the command's own.
func shellCommand(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = backend.ShellQuote(a)
	}
	return "exec " + strings.Join(quoted, " ")
}

// removeBuilder removes builder id, container and files. The caller holds
// its lock.
func (b *Backend) removeBuilder(ctx context.Context, id string) error {
	if err := b.removeContainer(ctx, id); err != nil {
		return fmt.Errorf("oci: removing builder %s: %w", id, err)
	}
	if err := b.removeSandboxDir(id, false); err != nil {
		return fmt.Errorf("oci: removing builder %s: %w", id, err)
	}
	if err := os.Remove(filepath.Join(b.opts.StateDir, buildersDir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// sweepBuilders removes the builders an agent left when it died mid-build:
// their containers would otherwise run on, unbounded in time. Best effort:
// one that cannot be removed now is removed by the next build of its ID.
func (b *Backend) sweepBuilders() {
	entries, err := os.ReadDir(filepath.Join(b.opts.StateDir, buildersDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		id := e.Name()
		if backend.ValidateID(id) != nil {
			continue
		}
		func() {
			defer b.locks.Lock(id)()
			if sb, err := b.load(id); err == nil && !sb.builder {
				// Never a tenant's sandbox, whatever the marker says.
				_ = os.Remove(filepath.Join(b.opts.StateDir, buildersDir, id))
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = b.removeBuilder(ctx, id)
		}()
	}
}

// checkReachable says why the sandbox's unprivileged root, which the
// runtime mounts as, cannot reach directory dir, if it cannot: dir must be
// readable and searchable by others, its ancestors searchable.
func checkReachable(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o005 != 0o005 {
		return fmt.Errorf("%s (mode %v) is not readable and searchable by others; sandboxes run as an unprivileged host uid", dir, fi.Mode().Perm())
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		pi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if pi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the ancestor %s (mode %v) of %s is not searchable by others; sandboxes run as an unprivileged host uid that must traverse it", p, pi.Mode().Perm(), dir)
		}
		if p == "/" {
			return nil
		}
	}
}

// copyOut copies the regular files and directories below src into dst,
// owned by the agent, modes 0755 or 0644 (executable or not), at most limit
// bytes in all: a sparse file may claim more than its image holds. It
// never follows a symbolic link: every entry is opened with O_NOFOLLOW
// after an lstat, and src is not written while it runs (the build's
// container is gone). Other entries are left behind.
func copyOut(src, dst string, limit int64) error {
	var total int64
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case p == src:
			return nil
		case d.IsDir():
			return os.Mkdir(target, 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		in, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0) //nolint:gosec // G122: the build's processes are gone (its container removed) before its output is read
		if err != nil {
			return err
		}
		defer in.Close()
		fi, err := in.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		if total += fi.Size(); total > limit {
			return fmt.Errorf("/out holds more than %d bytes (the builder's writable layer)", limit)
		}
		mode := os.FileMode(0o644)
		if fi.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, mode)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, io.LimitReader(in, fi.Size())); err != nil {
			out.Close()
			return err
		}
		if err := out.Chmod(mode); err != nil { // past the umask
			out.Close()
			return err
		}
		return out.Close()
	})
}

// tailSink keeps the last max bytes of a command's output, both streams
// in the order they came.
type tailSink struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (s *tailSink) Write(_ backend.Stream, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(p) >= s.max {
		s.buf = append(s.buf[:0], p[len(p)-s.max:]...)
		return
	}
	if over := len(s.buf) + len(p) - s.max; over > 0 {
		s.buf = append(s.buf[:0], s.buf[over:]...)
	}
	s.buf = append(s.buf, p...)
}

func (s *tailSink) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.buf...)
}
