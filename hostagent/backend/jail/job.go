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

package jail

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// A jail holds its jobs as every sandbox does (backend.JobHolder): each
// job has a holder in the jail, `playground-sandbox hold`
// (hostagent/guest/hold.go), started by jexec as the jail's root for that
// job. It is the same code as a Linux shepherd holding a job, with
// FreeBSD's reaper (procctl) for the proof: the job's output ring lives
// in the holder, charged to the jail, its socket and record in the jail's
// run directory (guestapi.RunDir/jobs), and it outlives the agent. Unlike
// a container, a jail has no init to join the agent to a job's holder:
// AttachJob starts a holder that connects to the job's socket inside the
// jail and hands the connection back (SCM_RIGHTS), then exits; so, unlike
// on Linux, a tenant that holds every process its jail may have delays
// the agent's reattachment until it lets one go (the manager retries).

// holderTimeout bounds a holder's answer to AttachJob.
const holderTimeout = 30 * time.Second

// jobJail checks that sandbox id's jail runs and can hold jobs, and names it.
func (b *Backend) jobJail(ctx context.Context, id string) (string, error) {
	if _, err := b.loadSpec(id); err != nil {
		return "", err
	}
	if b.guestDir == "" {
		return "", fmt.Errorf("%w: the jail backend holds jobs with the guest binary only (--guest-binary)", backend.ErrInvalidRequest)
	}
	up, err := b.running(ctx, id)
	if err != nil {
		return "", err
	}
	if !up {
		return "", fmt.Errorf("%w: jail %s", backend.ErrNotRunning, jailNameOf(id))
	}
	return jailNameOf(id), nil
}

// startHolder starts `playground-sandbox hold args...` in jail name, as
// the jail's root, in a session of its own (the agent's end is not the
// job's), with one end of a socket pair as its standard input: the other
// end is returned. The holder is reaped when it exits.
func (b *Backend) startHolder(name string, args ...string) (*net.UnixConn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("jail: a socket pair for a job's holder: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "holder"), os.NewFile(uintptr(fds[1]), "agent")
	defer theirs.Close()
	defer ours.Close()
	proc, err := b.run.Start(Command{
		Name:   "jexec",
		Args:   append([]string{name, guestapi.Binary, guestapi.HoldMode}, args...),
		Stdin:  theirs,
		Detach: true,
	})
	if err != nil {
		return nil, fmt.Errorf("jail: starting a job's holder in jail %s: %w", name, err)
	}
	// Owned by the holder: ends when it does, which may be long after
	// this agent (then init reaps it).
	go func() { _, _, _ = proc.Wait() }()
	c, err := net.FileConn(ours)
	if err != nil {
		return nil, fmt.Errorf("jail: a job's holder in jail %s: %w", name, err)
	}
	return c.(*net.UnixConn), nil
}

// JobConn implements backend.JobHolder: a holder started for the job,
// which takes its start on the returned connection.
func (b *Backend) JobConn(ctx context.Context, id string) (net.Conn, error) {
	name, err := b.jobJail(ctx, id)
	if err != nil {
		return nil, err
	}
	return b.startHolder(name)
}

// AttachJob implements backend.JobHolder: a holder started to connect to
// the job's socket in the jail hands that connection over and exits.
func (b *Backend) AttachJob(ctx context.Context, id, jobID string) (net.Conn, error) {
	name, err := b.jobJail(ctx, id)
	if err != nil {
		return nil, err
	}
	c, err := b.startHolder(name, guestapi.HoldAttachFlag, jobID)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(holderTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetReadDeadline(deadline)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("jail: attaching job %s in jail %s: the holder said nothing: %w", jobID, name, err)
	}
	conn, err := handedOver(buf[:n], oob[:oobn])
	if err != nil {
		return nil, fmt.Errorf("jail: attaching job %s in jail %s: %w", jobID, name, err)
	}
	return conn, nil
}

// handedOver is the connection a holder sent with its Started frame in
// msg, or its refusal (backend.ErrNotFound: the jail holds no such job).
func handedOver(msg, oob []byte) (net.Conn, error) {
	var fds []int
	if cmsgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, m := range cmsgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	closeAll := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	t, payload, used, err := guestapi.ParseFrame(msg)
	switch {
	case err != nil || used == 0:
		closeAll()
		return nil, fmt.Errorf("protocol error: the holder's answer is not a frame (%d bytes)", len(msg))
	case t == guestapi.FrameError:
		closeAll()
		return nil, fmt.Errorf("%w: %s", backend.ErrNotFound, strings.TrimSpace(string(payload)))
	case t != guestapi.FrameStarted || len(fds) != 1:
		closeAll()
		return nil, fmt.Errorf("protocol error: the holder answered %v with %d descriptors, want Started with one", t, len(fds))
	}
	f := os.NewFile(uintptr(fds[0]), "job")
	defer f.Close()
	return net.FileConn(f)
}

// ListJobs implements backend.JobHolder: the records in the jail's run
// directory, read from the node (no process of the jail starts), through
// an os.Root at the jail's root, so that no link in the jail leads out.
func (b *Backend) ListJobs(ctx context.Context, id string) ([]backend.JobRecord, error) {
	if _, err := b.jobJail(ctx, id); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(b.rootDir(id))
	if err != nil {
		return nil, fmt.Errorf("jail: the jobs of sandbox %s: %w", id, err)
	}
	defer root.Close()
	jobs, err := fs.Sub(root.FS(), strings.TrimPrefix(guestapi.RunDir, "/")+"/jobs")
	if err != nil {
		return nil, err
	}
	recs, err := guestapi.ReadJobRecords(jobs)
	if err != nil {
		return nil, fmt.Errorf("jail: the jobs of sandbox %s: %w", id, err)
	}
	return guestexec.Records(recs), nil
}

// resetRunDir empties the jail's run directory before the jail starts:
// its jobs ended with its processes. Root's, mode 0700, like a
// container's.
func (b *Backend) resetRunDir(id string) error {
	dir := filepath.Join(b.rootDir(id), guestapi.RunDir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("jail: clearing the run directory of sandbox %s: %w", id, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("jail: the run directory of sandbox %s: %w", id, err)
	}
	return nil
}
