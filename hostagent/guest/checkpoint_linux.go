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
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// A checkpoint (gVisor's, of the whole sandbox) saves every process and
// socket of the sandbox, but not a socket bound in a directory of the
// node's: gVisor backs that one with a socket of the node's, which it cannot
// save, and a save that meets one fails half-way and ends the sandbox. Init's
// agent and control sockets are such sockets (the agent reaches them from
// the node), and the shepherds share the first. So before the agent
// checkpoints a sandbox it asks init (guestapi.StartRequest.Checkpoint) to
// close them all (idle shepherds end; a busy one lets go of its share when
// init closes the release pipe, shepherdReleaseFD), and once the sandbox is restored it tells init to open
// them again (guestapi.ResumeSignal). Jobs are held on the sandbox's own
// /run (JobsDir), whose sockets are the sandbox's: they are saved with it.

// releaseTimeout bounds the wait for the shepherds to let go of the
// listening socket; they do so from a signal handler, at once.
const releaseTimeout = 5 * time.Second

// nodeBackedDirs are the sandbox's directories that are the node's (bind
// mounts): a unix socket bound in one of them is the node's under gVisor.
var nodeBackedDirs = []string{guestapi.TenantHome, guestapi.Workspace, "/tmp", guestapi.PileDir, guestapi.Dir}

type checkpointRequest struct {
	done chan error
}

// answerCheckpoint hands a Checkpoint request to init's main loop and
// answers the agent with its outcome.
func (in *initProc) answerCheckpoint(c net.Conn) {
	req := checkpointRequest{done: make(chan error, 1)}
	in.checkpoints <- req
	if err := <-req.done; err != nil {
		_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(err.Error())))
		return
	}
	_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameStarted, []byte(`{"pid":0}`)))
}

// release closes every socket of init's that the node backs and waits until
// no process of the sandbox holds one. When a process of the tenant holds a
// socket of the node's, init listens again and says which: the sandbox
// cannot be checkpointed as it is.
func (in *initProc) release() error {
	if in.released {
		return nil
	}
	if held := tenantNodeSockets(); len(held) > 0 {
		return fmt.Errorf("a process of the sandbox listens on a unix socket bound in a directory the node backs (%s), which gVisor cannot checkpoint; bind it under /run or /dev/shm, or in the abstract namespace, instead", strings.Join(held, ", "))
	}
	// The sockets as /proc names them ("socket:[N]"), to find who holds
	// them (fstat's inode numbers are not those under gVisor).
	links := map[string]bool{}
	if l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", in.listener.Fd())); err == nil {
		links[l] = true
	}
	if l, ok := controlLink(in.control); ok {
		links[l] = true
	}
	// The agent takes the agent socket's existence for init's readiness: it
	// goes first, and comes back once init listens again.
	for _, name := range []string{guestapi.SocketName, guestapi.ControlSocketName} {
		_ = os.Remove(filepath.Join(guestapi.RunDir, name))
	}
	in.released = true
	_ = in.control.Close()
	_ = in.listener.Close()
	// The busy shepherds see the pipe's end and let go (dropListener).
	_ = in.releaseW.Close()
	_ = in.releaseR.Close()
	in.control, in.listener, in.releaseR, in.releaseW = nil, nil, nil, nil
	for pid := range in.idle {
		// An idle shepherd holds nothing but the socket.
		in.ending[pid] = true
		_ = unix.Kill(pid, unix.SIGKILL)
		delete(in.idle, pid)
	}
	deadline := time.Now().Add(releaseTimeout)
	for {
		in.reap()
		// A shepherd that went idle meanwhile is ended (noteBusy).
		for drained := false; !drained; {
			select {
			case msg := <-in.busyPIDs:
				in.noteBusy(msg)
			default:
				drained = true
			}
		}
		// A killed shepherd's files are closed once it is reaped, not
		// when /proc stops listing them: gVisor empties an exiting
		// task's file table before it closes the files, and a checkpoint
		// that meets the socket still open fails (and ends the sandbox).
		holders := socketHolders(links)
		for pid := range in.ending {
			holders = append(holders, pid)
		}
		if len(holders) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("processes %v of the sandbox still hold init's listening socket after %s", holders, releaseTimeout)
			return fmt.Errorf("%w; init listens again: %v", err, in.relisten())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// relisten opens the sockets release closed, once the sandbox was restored
// from its checkpoint (or the checkpoint was given up), and starts spares
// again (the main loop's fill).
func (in *initProc) relisten() error {
	if !in.released {
		return nil
	}
	if err := in.listen(); err != nil {
		return fmt.Errorf("listening again after a checkpoint: %w", err)
	}
	in.released = false
	return nil
}

// controlLink is the control listener's name in /proc ("socket:[N]").
func controlLink(ln *net.UnixListener) (string, bool) {
	raw, err := ln.SyscallConn()
	if err != nil {
		return "", false
	}
	var link string
	var lerr error
	if err := raw.Control(func(fd uintptr) { link, lerr = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)) }); err != nil || lerr != nil {
		return "", false
	}
	return link, true
}

// socketHolders lists the processes that hold one of these sockets, named
// as /proc names them.
func socketHolders(links map[string]bool) []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue // gone, or a zombie
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name()))
			if err == nil && links[link] {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// tenantNodeSockets lists the paths of the listening unix sockets bound in
// a directory the node backs, other than init's (in RunDir): those a
// checkpoint cannot save.
func tenantNodeSockets() []string {
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		return nil
	}
	defer f.Close()
	var held []string
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		path := fields[7]
		if strings.HasPrefix(path, guestapi.RunDir+"/") {
			continue
		}
		for _, dir := range nodeBackedDirs {
			if path == dir || strings.HasPrefix(path, dir+"/") {
				held = append(held, path)
				break
			}
		}
	}
	return held
}
