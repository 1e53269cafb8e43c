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

package guestexec

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// File has the shepherd that accepts conn, a connection to the sandbox's
// init, serve a file call (the guest's File request) and returns its
// answer: a refusal as a *backend.FileRefused, a failure in the sandbox
// wrapping backend.ErrInvalidRequest. ctx bounds the whole call; when it
// ends, the connection is closed and the shepherd gives up the call.
// conn is closed when File returns.
func File(ctx context.Context, conn net.Conn, call backend.FileCall) (backend.FileResult, error) {
	defer conn.Close()
	if len(call.Data) > guestapi.MaxStdin {
		return backend.FileResult{}, fmt.Errorf("%w: %d bytes to write, more than %d", backend.ErrInvalidRequest, len(call.Data), guestapi.MaxStdin)
	}
	if call.Length < 0 || call.Length > guestapi.MaxStdin {
		return backend.FileResult{}, fmt.Errorf("%w: a read of %d bytes, out of 0 to %d", backend.ErrInvalidRequest, call.Length, guestapi.MaxStdin)
	}
	// When ctx ends, the shepherd is told by the end of the agent's
	// half of the connection, and its answer (a digest that stopped) is
	// awaited, within ProofTimeout: nothing of the call runs on once File
	// returns. A connection that cannot be half closed is closed.
	stop := context.AfterFunc(ctx, func() {
		if cw, ok := conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_ = conn.SetDeadline(time.Now().Add(guestapi.ProofTimeout))
			return
		}
		_ = conn.SetDeadline(time.Now())
	})
	defer stop()
	res, err := file(conn, call)
	if ctx.Err() != nil {
		return backend.FileResult{}, ctx.Err()
	}
	return res, err
}

func file(conn net.Conn, call backend.FileCall) (backend.FileResult, error) {
	start, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStart, guestapi.StartRequest{
		Version: guestapi.ProtocolVersion, Cwd: call.Cwd,
		File: &guestapi.FileRequest{Op: call.Op, Path: call.Path, Offset: call.Offset, Length: call.Length, Whole: call.Whole, Size: len(call.Data)},
	})
	if err != nil {
		return backend.FileResult{}, err
	}
	// The bytes to write go out as they are, in frames as large as the
	// protocol allows, in one writev: no copy.
	bufs := net.Buffers{start}
	for rest := call.Data; len(rest) > 0; {
		n := min(len(rest), guestapi.MaxFrame)
		bufs = append(bufs, frameHeader(guestapi.FrameStdin, n), rest[:n])
		rest = rest[n:]
	}
	bufs = append(bufs, frameHeader(guestapi.FrameStdinEnd, 0))
	if _, err := bufs.WriteTo(conn); err != nil {
		return backend.FileResult{}, err
	}
	br := bufio.NewReader(conn)
	t, payload, err := guestapi.NewFrameReader(br).ReadFrame()
	if err != nil {
		return backend.FileResult{}, err
	}
	switch t {
	case guestapi.FrameFile:
	case guestapi.FrameError:
		return backend.FileResult{}, refusal(payload)
	case guestapi.FrameStarted:
		return backend.FileResult{}, errors.New("the sandbox's guest does not serve file calls (it predates them): restart the sandbox to run the agent's guest binary")
	default:
		return backend.FileResult{}, fmt.Errorf("protocol error: %v frame in answer to a file call", t)
	}
	var ans guestapi.FileAnswer
	if err := json.Unmarshal(payload, &ans); err != nil {
		return backend.FileResult{}, fmt.Errorf("protocol error: File: %w", err)
	}
	if ans.Refused != "" {
		return backend.FileResult{}, &backend.FileRefused{Why: ans.Refused, Detail: ans.Detail}
	}
	if ans.Len < 0 || ans.Len > call.Length || (ans.Len > 0 && call.Op != filecall.Read) {
		return backend.FileResult{}, fmt.Errorf("protocol error: %d bytes answer a file call of %d", ans.Len, call.Length)
	}
	res := backend.FileResult{Path: ans.Path, Size: ans.Size, SHA256: ans.SHA256}
	if ans.Len > 0 {
		// Read straight into the result: its size is bounded by the
		// call's, which the agent chose.
		res.Data = make([]byte, ans.Len)
		for got := 0; got < ans.Len; {
			var hdr [guestapi.HeaderSize]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				return backend.FileResult{}, fmt.Errorf("reading the file's bytes: %w", err)
			}
			n := int(binary.BigEndian.Uint32(hdr[1:]))
			if guestapi.FrameType(hdr[0]) != guestapi.FrameStdout || n > ans.Len-got {
				return backend.FileResult{}, fmt.Errorf("protocol error: %v frame of %d bytes in a file's %d", guestapi.FrameType(hdr[0]), n, ans.Len)
			}
			if _, err := io.ReadFull(br, res.Data[got:got+n]); err != nil {
				return backend.FileResult{}, fmt.Errorf("reading the file's bytes: %w", err)
			}
			got += n
		}
	}
	return res, nil
}

func frameHeader(t guestapi.FrameType, n int) []byte {
	h := make([]byte, guestapi.HeaderSize)
	h[0] = byte(t)
	binary.BigEndian.PutUint32(h[1:], uint32(n))
	return h
}
