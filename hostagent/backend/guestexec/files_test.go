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
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/filecall"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// fakeGuest answers one file call on the far end of a pipe with frames,
// after reading the call's.
func fakeGuest(t *testing.T, answer func(req guestapi.StartRequest, data []byte) []byte) net.Conn {
	t.Helper()
	agent, guest := net.Pipe()
	done := make(chan struct{})
	t.Cleanup(func() { guest.Close(); <-done })
	// Owned by the test: ends when the pipe is closed.
	go func() {
		defer close(done)
		fr := guestapi.NewFrameReader(bufio.NewReader(guest))
		var req guestapi.StartRequest
		var data []byte
		for {
			ft, p, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch ft {
			case guestapi.FrameStart:
				_ = json.Unmarshal(p, &req)
			case guestapi.FrameStdin:
				data = append(data, p...)
			case guestapi.FrameStdinEnd:
				_, _ = guest.Write(answer(req, data))
				return
			}
		}
	}()
	return agent
}

func fileFrame(t *testing.T, a guestapi.FileAnswer) []byte {
	t.Helper()
	f, err := guestapi.AppendJSONFrame(nil, guestapi.FrameFile, a)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFileClient: the host's client carries a call and its bytes to the
// guest and its answer back: the bytes of a read, a refusal as
// *backend.FileRefused, a failure as ErrInvalidRequest; it reads no more
// than the call asked for, whatever a guest claims, and tells a guest
// that predates file calls.
func TestFileClient(t *testing.T) {
	ctx := context.Background()
	payload := strings.Repeat("x", guestapi.MaxFrame+10) // more than one frame
	conn := fakeGuest(t, func(req guestapi.StartRequest, data []byte) []byte {
		if req.File == nil || req.File.Op != filecall.Write || req.File.Path != "f" || req.Cwd != "d" || string(data) != payload {
			return guestapi.AppendFrame(nil, guestapi.FrameError, []byte("the call arrived otherwise"))
		}
		return fileFrame(t, guestapi.FileAnswer{Path: "/home/d/f", Size: int64(len(data))})
	})
	res, err := File(ctx, conn, backend.FileCall{Op: filecall.Write, Path: "f", Cwd: "d", Data: []byte(payload)})
	if err != nil || res.Path != "/home/d/f" || res.Size != int64(len(payload)) {
		t.Fatalf("write: %+v, %v", res, err)
	}

	conn = fakeGuest(t, func(guestapi.StartRequest, []byte) []byte {
		b := fileFrame(t, guestapi.FileAnswer{Path: "/f", Size: 5, Len: 5})
		b = guestapi.AppendFrame(b, guestapi.FrameStdout, []byte("he"))
		return guestapi.AppendFrame(b, guestapi.FrameStdout, []byte("llo"))
	})
	res, err = File(ctx, conn, backend.FileCall{Op: filecall.Read, Path: "f", Length: 10})
	if err != nil || string(res.Data) != "hello" {
		t.Fatalf("read: %q, %v", res.Data, err)
	}

	for name, tc := range map[string]struct {
		answer func(t *testing.T) []byte
		check  func(error) bool
	}{
		"a refusal": {func(t *testing.T) []byte { return fileFrame(t, guestapi.FileAnswer{Refused: filecall.InPile}) },
			func(err error) bool {
				var r *backend.FileRefused
				return errors.As(err, &r) && r.Why == filecall.InPile
			}},
		"a failure": {func(*testing.T) []byte {
			return guestapi.AppendFrame(nil, guestapi.FrameError, []byte("permission denied"))
		},
			func(err error) bool { return errors.Is(err, backend.ErrInvalidRequest) }},
		"more bytes than asked": {func(t *testing.T) []byte { return fileFrame(t, guestapi.FileAnswer{Len: 11}) },
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "protocol error") }},
		"a frame past the length": {func(t *testing.T) []byte {
			return guestapi.AppendFrame(fileFrame(t, guestapi.FileAnswer{Len: 2}), guestapi.FrameStdout, []byte("abc"))
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "protocol error") }},
		"a guest that predates file calls": {func(*testing.T) []byte {
			return guestapi.AppendFrame(nil, guestapi.FrameStarted, []byte(`{"pid":7}`))
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "restart the sandbox") }},
	} {
		conn := fakeGuest(t, func(guestapi.StartRequest, []byte) []byte { return tc.answer(t) })
		if _, err := File(ctx, conn, backend.FileCall{Op: filecall.Read, Path: "f", Length: 10}); !tc.check(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
