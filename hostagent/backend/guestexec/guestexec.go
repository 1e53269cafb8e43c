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

// Package guestexec is the agent's side of the guest protocol, for every
// backend whose sandboxes run playground-sandbox's init (oci's containers,
// vm's virtual machines): it starts a command on an idle shepherd over a
// connection to init and follows it to its proven end, and it asks a
// shepherd to relay a connection to a port of the sandbox's loopback. The
// kernel runs a command here itself (Exec, with the backend's
// backend.Guest); a backend finds the connection (a unix socket, a stream
// of a VM's port) and explains what only it knows (backend.GuestHooks):
// why a connection broke or a start failed, whether the sandbox ran out of
// memory.
package guestexec

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Encode checks req and encodes it as the frames that start it, to go out
// in one write.
func Encode(req backend.ExecRequest) ([]byte, error) {
	return encode(req, nil)
}

// encode is Encode, of a job the sandbox holds when job is set.
func encode(req backend.ExecRequest, job *guestapi.JobSpec) ([]byte, error) {
	login := true
	switch req.Shell {
	case backend.ShellLogin, "":
	case backend.ShellClean:
		login = false
	default:
		return nil, fmt.Errorf("unknown shell mode %q", req.Shell)
	}
	if len(req.Command) > bounds.MaxCommandBytes {
		return nil, errors.New(bounds.CommandTooLong(len(req.Command)))
	}
	if len(req.Stdin) > guestapi.MaxStdin {
		return nil, fmt.Errorf("stdin is %d bytes, more than %d", len(req.Stdin), guestapi.MaxStdin)
	}
	buf, err := guestapi.AppendJSONFrame(make([]byte, 0, 256+len(req.Command)+len(req.Stdin)+guestapi.HeaderSize*(2+len(req.Stdin)/guestapi.StdinChunk)),
		guestapi.FrameStart, startRequest(req.Command, login, req.Cwd, job))
	if err != nil {
		return nil, err
	}
	for rest := req.Stdin; len(rest) > 0; {
		n := min(len(rest), guestapi.StdinChunk)
		buf = guestapi.AppendFrame(buf, guestapi.FrameStdin, rest[:n])
		rest = rest[n:]
	}
	return guestapi.AppendFrame(buf, guestapi.FrameStdinEnd, nil), nil
}

func startRequest(command string, login bool, cwd string, job *guestapi.JobSpec) guestapi.StartRequest {
	return guestapi.StartRequest{Version: guestapi.ProtocolVersion, Command: command, Login: login, Cwd: cwd, Job: job}
}

// Start sends the request frames req (from Encode) on conn, a connection
// to the sandbox's init that an idle shepherd accepts, and waits for the
// shepherd's Started. ctx bounds the start only; when it ends while the
// shell starts, the command is killed before Start returns. On failure
// conn is closed and the error is the caller's to explain: it wraps
// backend.ErrInvalidRequest when the shepherd refused the request (a cwd
// that does not exist), ctx's error when ctx ended, else the transport's.
func Start(ctx context.Context, conn net.Conn, req []byte, sink backend.Sink, hooks backend.GuestHooks) (backend.Process, error) {
	if sink == nil {
		sink = discardSink{}
	}
	start := time.Now()
	// Until the command runs, ctx bounds every read and write.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	fail := func(err error) (backend.Process, error) {
		stop()
		conn.Close()
		if hooks.Release != nil {
			hooks.Release()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if _, err := conn.Write(req); err != nil {
		return fail(err)
	}
	br := getReader(conn)
	fr := guestapi.NewFrameReader(br)
	t, payload, err := fr.ReadFrame()
	if err != nil {
		putReader(br)
		return fail(err)
	}
	switch t {
	case guestapi.FrameStarted:
	case guestapi.FrameError:
		putReader(br)
		return fail(refusal(payload))
	default:
		putReader(br)
		return fail(fmt.Errorf("protocol error: %v frame before Started", t))
	}
	if !stop() {
		// ctx ended while the shell was starting: it runs; kill it.
		hooks.OOMKilled = nil
		p := newProcess(conn, br, sink, start, hooks)
		kctx, cancel := context.WithTimeout(context.Background(), guestapi.ProofTimeout+5*time.Second)
		defer cancel()
		if kerr := p.Kill(kctx); kerr != nil {
			return nil, fmt.Errorf("%w (and killing the command: %w)", ctx.Err(), kerr)
		}
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	return newProcess(conn, br, sink, start, hooks), nil
}

// readers are the buffered readers of commands' connections, each with
// room for a whole output frame: one a command was half of what the agent
// allocated per exec of `true`. A command's reader goes back when its
// connection is done with; the frames read from it are copies (a
// FrameReader's own buffer), so nothing read through it outlives that.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, guestapi.OutputChunk+guestapi.HeaderSize) }}

func getReader(conn net.Conn) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(conn)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// process is a command running under a shepherd. One goroutine per process
// reads the connection; it ends when the shepherd ends the command (which
// it always does: normal exit, Kill, or lost proof) and closes the
// connection.
type process struct {
	conn  net.Conn
	sink  backend.Sink
	start time.Time
	hooks backend.GuestHooks

	// Ended is the command's end, which Wait answers.
	backend.Ended

	killOnce sync.Once
	killErr  error
}

// newProcess follows the command on conn, read through br (which it puts
// back when done).
func newProcess(conn net.Conn, br *bufio.Reader, sink backend.Sink, start time.Time, hooks backend.GuestHooks) *process {
	p := &process{conn: conn, sink: sink, start: start, hooks: hooks, Ended: backend.NewEnded()}
	// Owned by the process: ends when the shepherd ends the command.
	go p.read(br)
	return p
}

func (p *process) read(br *bufio.Reader) {
	fr := guestapi.NewFrameReader(br)
	defer close(p.Done)
	defer putReader(br)
	defer p.conn.Close()
	if p.hooks.Release != nil {
		defer p.hooks.Release()
	}
	defer func() {
		if p.hooks.OOMKilled != nil && (p.Status.Signal != "" || p.Status.ExitCode > 128 || p.Err != nil) {
			p.Status.OOMKilled = p.hooks.OOMKilled()
		}
	}()
	for {
		t, payload, err := fr.ReadFrame()
		if err != nil {
			p.Status = backend.ExitStatus{ExitCode: -1, Duration: time.Since(p.start)}
			p.Err = fmt.Errorf("%w: the sandbox's shepherd went away without a result: %v", backend.ErrProofLost, err)
			if p.hooks.Lost != nil {
				p.Err = p.hooks.Lost(err)
			}
			if p.Err == nil {
				p.Status.Killed, p.Status.Signal = true, "SIGKILL"
			}
			return
		}
		switch t {
		case guestapi.FrameStdout:
			p.sink.Write(backend.Stdout, payload)
		case guestapi.FrameStderr:
			p.sink.Write(backend.Stderr, payload)
		case guestapi.FrameExit:
			var e guestapi.End
			if err := json.Unmarshal(payload, &e); err != nil {
				p.Err = fmt.Errorf("%w: bad Exit frame: %v", backend.ErrProofLost, err)
				p.Status = backend.ExitStatus{ExitCode: -1, Duration: time.Since(p.start)}
				return
			}
			p.Status = e.Status
			p.Status.Duration = time.Since(p.start)
			return
		case guestapi.FrameProofLost:
			p.Err = fmt.Errorf("%w: %s", backend.ErrProofLost, payload)
			p.Status = backend.ExitStatus{ExitCode: -1, Killed: true, Duration: time.Since(p.start)}
			return
		default:
			p.Err = fmt.Errorf("%w: protocol error: unexpected %v frame", backend.ErrProofLost, t)
			p.Status = backend.ExitStatus{ExitCode: -1, Duration: time.Since(p.start)}
			return
		}
	}
}

// Kill implements backend.Process. It returns nil once the shepherd has
// proven that no descendant of the command is left, or if the command had
// already ended by itself (its background processes then belong to the
// sandbox, like those of any finished command).
func (p *process) Kill(ctx context.Context) error {
	select {
	case <-p.Done:
		return p.Err
	default:
	}
	p.killOnce.Do(func() {
		stop := context.AfterFunc(ctx, func() { _ = p.conn.SetWriteDeadline(time.Now()) })
		_, p.killErr = p.conn.Write(guestapi.AppendFrame(nil, guestapi.FrameKill, nil))
		stop()
	})
	select {
	case <-p.Done:
		return p.Err
	case <-ctx.Done():
		if p.killErr != nil {
			return fmt.Errorf("%w: sending kill: %w", backend.ErrProofLost, p.killErr)
		}
		return fmt.Errorf("%w: no proof of cleanup yet: %w", backend.ErrProofLost, ctx.Err())
	}
}

type discardSink struct{}

func (discardSink) Write(backend.Stream, []byte) {}

// Dial asks the shepherd that accepts conn to connect to port on the
// sandbox's loopback and relay bytes (the guest's Dial request); ctx
// bounds the answer. The connection returned is the worker's; on failure
// conn is closed, and the error wraps backend.ErrInvalidRequest when the
// shepherd could not connect.
func Dial(ctx context.Context, conn net.Conn, port int) (net.Conn, error) {
	br, err := ask(ctx, conn, guestapi.StartRequest{Version: guestapi.ProtocolVersion, Dial: port})
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: conn, r: br}, nil
}

// DialPort is a backend's DialSandbox (backend.Dialer) over a connection
// to the sandbox's init that connect makes: it refuses what is not a TCP
// port, bounds a ctx without a deadline by timeout, and has an idle
// shepherd connect to port on the sandbox's loopback and relay bytes
// (Dial). name ("oci", "vm") and id make the errors say where.
func DialPort(ctx context.Context, name, id string, port int, timeout time.Duration, connect func(context.Context) (net.Conn, error)) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("%s: port %d is not a TCP port", name, port)
	}
	ctx, cancel := BoundStart(ctx, timeout)
	defer cancel()
	conn, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	c, err := Dial(ctx, conn, port)
	if err != nil {
		return nil, fmt.Errorf("%s: reaching port %d in sandbox %s: %w", name, port, id, err)
	}
	return c, nil
}

// WriteEtc asks the shepherd that accepts conn, in a VM, to replace the
// sandbox's generated /etc files (guestapi.EtcDir) with files; ctx bounds it.
// conn is closed when it returns.
func WriteEtc(ctx context.Context, conn net.Conn, files map[string]string) error {
	_, err := ask(ctx, conn, guestapi.StartRequest{Version: guestapi.ProtocolVersion, Etc: files})
	conn.Close()
	return err
}

// ask sends a request that runs no command and waits for its Started:
// the reader holds what followed it.
func ask(ctx context.Context, conn net.Conn, req guestapi.StartRequest) (*bufio.Reader, error) {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	fail := func(err error) (*bufio.Reader, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, err
	}
	frame, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStart, req)
	if err != nil {
		return fail(err)
	}
	if _, err := conn.Write(frame); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(conn)
	t, payload, err := guestapi.NewFrameReader(br).ReadFrame()
	if err != nil {
		return fail(err)
	}
	switch t {
	case guestapi.FrameStarted:
	case guestapi.FrameError:
		return fail(refusal(payload))
	default:
		return fail(fmt.Errorf("protocol error: %v frame before Started", t))
	}
	if !stop() {
		conn.Close()
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	return br, nil
}

// bufferedConn reads through the reader that parsed the relay's answer,
// which may hold the first bytes of the worker's.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
