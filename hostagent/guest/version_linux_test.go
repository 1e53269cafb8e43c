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
	"bytes"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// TestAnotherProtocolVersionIsRefused: a guest answers a request of
// another guest protocol version with a refusal that names both versions
// and says what to do, before it reads the rest or runs anything: on
// init's control socket (and a VM's agent port), and in a shepherd.
func TestAnotherProtocolVersionIsRefused(t *testing.T) {
	other := guestapi.ProtocolVersion + 1
	want := "guest protocol version 2 is not spoken by this sandbox's guest, which speaks 1: restart the sandbox to run the agent's guest binary"
	if guestapi.ProtocolVersion != 1 || guestapi.UnsupportedVersion(other, guestapi.ProtocolVersion) != want {
		t.Fatalf("the refusal reads %q", guestapi.UnsupportedVersion(other, guestapi.ProtocolVersion))
	}
	request := func(version int) []byte {
		frames, err := guestapi.AppendJSONFrame(nil, guestapi.FrameStart, guestapi.StartRequest{Version: version, Command: "echo hi"})
		if err != nil {
			t.Fatal(err)
		}
		return guestapi.AppendFrame(frames, guestapi.FrameStdinEnd, nil)
	}

	if _, _, err := readStart(guestapi.NewFrameReader(bufio.NewReader(bytes.NewReader(request(other))))); err == nil || err.Error() != want {
		t.Errorf("init, a request of version %d: %v", other, err)
	}
	if req, _, err := readStart(guestapi.NewFrameReader(bufio.NewReader(bytes.NewReader(request(guestapi.ProtocolVersion))))); err != nil || req.Command != "echo hi" {
		t.Errorf("init, a request of version %d: %+v, %v", guestapi.ProtocolVersion, req, err)
	}

	for _, version := range []int{other, guestapi.ProtocolVersion} {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(fds[1], request(version)); err != nil {
			t.Fatal(err)
		}
		req, _, err := (&shepherd{conn: fds[0]}).readRequest()
		unix.Close(fds[0])
		unix.Close(fds[1])
		switch {
		case version == other && (err == nil || err.Error() != want):
			t.Errorf("a shepherd, a request of version %d: %v", version, err)
		case version == guestapi.ProtocolVersion && (err != nil || req.Command != "echo hi"):
			t.Errorf("a shepherd, a request of version %d: %+v, %v", version, req, err)
		}
	}
}
