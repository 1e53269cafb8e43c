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
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Init answers the agent's job listings and attachments itself, on its
// control socket (RunDir/ControlSocketName, and in a VM the agent port's
// streams that ask for them), without a shepherd: a shepherd is a process
// of the sandbox, which a tenant that holds every PID of its limit (or
// every spare shepherd, with jobs) can keep from starting. The jobs a
// sandbox holds are then handed over to an agent that restarts whatever its
// tenant does, and the agent's supervision of them never waits on what the
// tenant can exhaust. Init only reads the job records and joins the agent
// to a job's holder, which listens itself: no process starts.

// maxControl bounds init's control connections at once; past it a new one
// is closed.
const maxControl = 16

// isControl says whether a Start request is one init answers itself.
func isControl(req guestapi.StartRequest) bool {
	return req.Jobs || req.Attach != ""
}

// listenControl makes init's control socket, root's only.
func listenControl() (*net.UnixListener, error) {
	path := filepath.Join(guestapi.RunDir, guestapi.ControlSocketName)
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// serveControl accepts on init's control socket until it is closed (for a
// checkpoint: release).
func (in *initProc) serveControl(ln *net.UnixListener) {
	slots := make(chan struct{}, maxControl)
	for {
		c, err := ln.AcceptUnix()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			in.log.Printf("control socket: %v", err)
			time.Sleep(time.Second)
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			c.Close() // the agent retries; no tenant reaches this socket
			continue
		}
		go func() {
			defer func() { <-slots }()
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(requestTimeout))
			br := bufio.NewReader(c)
			req, _, err := readStart(guestapi.NewFrameReader(br))
			if err != nil {
				_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(err.Error())))
				return
			}
			_ = c.SetReadDeadline(time.Time{})
			if req.Checkpoint {
				in.answerCheckpoint(c)
				return
			}
			if !isControl(req) {
				_, _ = c.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte("the control socket answers job listings and attachments only")))
				return
			}
			answerControl(c, br, c.CloseWrite, req)
		}()
	}
}

// answerControl answers a listing, or joins the agent (rw, with br holding
// what it sent behind its request) to the holder of the job it attaches
// to, both ways, until both are closed.
func answerControl(rw io.ReadWriter, br *bufio.Reader, closeWrite func() error, req guestapi.StartRequest) {
	if req.Jobs {
		recs, err := ListJobs()
		if err != nil {
			_, _ = rw.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(err.Error())))
			return
		}
		if f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameJobs, recs); err == nil {
			_, _ = rw.Write(f)
		}
		return
	}
	if !validJobID(req.Attach) {
		_, _ = rw.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(fmt.Sprintf("job ID %q is malformed", req.Attach))))
		return
	}
	up, err := dialBounded("unix", filepath.Join(JobsDir, req.Attach+".sock"))
	if err != nil {
		_, _ = rw.Write(guestapi.AppendFrame(nil, guestapi.FrameError, []byte(fmt.Sprintf("no job %s in this sandbox: it ended and was released, or the sandbox restarted", req.Attach))))
		return
	}
	defer up.Close()
	if _, err := rw.Write(guestapi.AppendFrame(nil, guestapi.FrameStarted, []byte(`{"pid":0}`))); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// What the agent sent behind its request is in br, then the rest.
		_, _ = io.Copy(up, br)
		_ = up.(*net.UnixConn).CloseWrite()
	}()
	_, _ = io.Copy(rw, up)
	_ = closeWrite()
	<-done
}
