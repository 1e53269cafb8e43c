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

package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// testFileRanges checks ranged reads and writes and the whole-file digest,
// with which a client moves a file larger than one call's payload: the
// sandbox's own tools (tail, head, dd, sha256sum or sha256) must do what
// the kernel's scripts ask of them.
func testFileRanges(t *testing.T, n *node, s *session) {
	ctx := context.Background()
	const limit = hostagent.DefaultMaxFileBytes
	readRange := func(path string, off int64, length int) (hostagent.FileContent, error) {
		return s.agent.Files().ReadFileRange(ctx, s.tenant, s.handle, path, "", hostagent.Range{Offset: off, Length: length})
	}
	digest := func(path string) (hostagent.FileDigest, error) {
		return s.agent.Files().DigestFile(ctx, s.tenant, s.handle, path, "")
	}
	appendTo := func(path string, data []byte) (hostagent.FileInfo, error) {
		return s.agent.Files().AppendFile(ctx, s.tenant, s.handle, path, "", data)
	}
	writeAt := func(path string, off int64, data []byte) (hostagent.FileInfo, error) {
		return s.agent.Files().WriteFileAt(ctx, s.tenant, s.handle, path, "", off, data)
	}
	hexSum := func(data []byte) string { sum := sha256.Sum256(data); return hex.EncodeToString(sum[:]) }
	// Over two payloads and not a multiple of one: three calls, the last
	// short.
	payload := make([]byte, 2*limit+limit/3)
	_, _ = rand.Read(payload)
	size := int64(len(payload))
	s.sh(t, "mkdir -p ranges")

	t.Run("chunked upload", func(t *testing.T) {
		n.known(t)
		// By append, in order.
		for off := 0; off < len(payload); off += limit {
			chunk := payload[off:min(off+limit, len(payload))]
			info, err := appendTo("ranges/appended", chunk)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != len(chunk) || info.SHA256 != hexSum(chunk) || info.FileSize != int64(off+len(chunk)) ||
				info.Path != guestapi.TenantHome+"/ranges/appended" {
				t.Fatalf("appending at %d answered %+v", off, info)
			}
		}
		// By offset, last range first: the file has gaps until the end.
		var offsets []int
		for off := 0; off < len(payload); off += limit {
			offsets = append([]int{off}, offsets...)
		}
		for _, off := range offsets {
			chunk := payload[off:min(off+limit, len(payload))]
			info, err := writeAt("ranges/placed", int64(off), chunk)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size != len(chunk) || info.SHA256 != hexSum(chunk) || info.FileSize != size {
				t.Fatalf("writing at %d answered %+v, want the file's size %d", off, info, size)
			}
		}
		for _, f := range []string{"ranges/appended", "ranges/placed"} {
			d, err := digest(f)
			if err != nil {
				t.Fatal(err)
			}
			if d.Size != size || d.SHA256 != hexSum(payload) || d.Path != guestapi.TenantHome+"/"+f {
				t.Fatalf("the digest of %s: %+v, want %d bytes, sha256 %s", f, d, size, hexSum(payload))
			}
		}
		if got := s.sh(t, "sha256sum < ranges/placed"); got != hexSum(payload)+"  -\n" {
			t.Fatalf("the sandbox holds other bytes: %s", got)
		}
	})

	t.Run("in place", func(t *testing.T) {
		n.known(t)
		s.sh(t, "printf 0123456789 > ranges/small")
		if _, err := writeAt("ranges/small", 3, []byte("abc")); err != nil {
			t.Fatal(err)
		}
		info, err := writeAt("ranges/small", 12, []byte("Z"))
		if err != nil {
			t.Fatal(err)
		}
		if info.FileSize != 13 {
			t.Fatalf("writing past the end answered %+v, want the file's size 13", info)
		}
		if got := s.sh(t, "tr '\\000' _ < ranges/small"); got != "012abc6789__Z" {
			t.Fatalf("after writing in place and past the end: %q, want the rest kept and a gap of zero bytes", got)
		}
		if info, err := appendTo("ranges/new", nil); err != nil || info.FileSize != 0 {
			t.Fatalf("appending nothing to a missing file: %+v, %v; want it created empty", info, err)
		}
	})

	t.Run("ranged read", func(t *testing.T) {
		n.known(t)
		// The file, put together by whole writes and cat only.
		var parts []string
		for off := 0; off < len(payload); off += limit {
			part := fmt.Sprintf("ranges/part%d", off/limit)
			if _, err := s.agent.Files().WriteFile(ctx, s.tenant, s.handle, part, "", payload[off:min(off+limit, len(payload))]); err != nil {
				t.Fatal(err)
			}
			parts = append(parts, part)
		}
		s.sh(t, "cat "+strings.Join(parts, " ")+" > ranges/read && rm "+strings.Join(parts, " "))
		for _, tc := range []struct {
			name   string
			off    int64
			length int
			want   []byte
		}{
			{"the start", 0, 10, payload[:10]},
			{"the middle", size / 2, 1000, payload[size/2 : size/2+1000]},
			{"the end", size - 10, 100, payload[size-10:]},
			{"at the end", size, 0, nil},
			{"past the end", size + 1000, 5, nil},
			{"a whole range", limit, 0, payload[limit : 2*limit]},
		} {
			got, err := readRange("ranges/read", tc.off, tc.length)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			eof := tc.off+int64(len(tc.want)) >= size
			if !bytes.Equal(got.Data, tc.want) || got.Size != len(tc.want) || got.SHA256 != hexSum(tc.want) ||
				got.Offset != tc.off || got.FileSize != size || got.EOF != eof || got.Path != guestapi.TenantHome+"/ranges/read" {
				t.Errorf("%s: %d bytes at %d of %d, EOF %v, sha256 %s, path %s; want %d bytes, EOF %v",
					tc.name, got.Size, got.Offset, got.FileSize, got.EOF, got.SHA256, got.Path, len(tc.want), eof)
			}
		}
		// A download: range after range from where the last ended, to
		// EOF, checked against the digest.
		var whole []byte
		for off := int64(0); ; {
			got, err := readRange("ranges/read", off, 0)
			if err != nil {
				t.Fatal(err)
			}
			whole = append(whole, got.Data...)
			off += int64(got.Size)
			if got.EOF {
				break
			}
			if got.Size != limit {
				t.Fatalf("a range before the end has %d bytes, want %d", got.Size, limit)
			}
		}
		d, err := digest("ranges/read")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole, payload) || hexSum(whole) != d.SHA256 {
			t.Fatalf("downloaded %d bytes that differ from the %d of the file", len(whole), size)
		}
		// A whole read of the same file is still refused, not truncated.
		if _, err := s.agent.Files().ReadFile(ctx, s.tenant, s.handle, "ranges/read", ""); hostagent.CodeOf(err) != agentapi.CodeTooLarge {
			t.Fatalf("a whole read of a file over the limit: %v, want too_large", err)
		}
	})

	t.Run("ranged refusals", func(t *testing.T) {
		n.known(t)
		s.sh(t, "printf keep > ranges/kept; mkdir -p ranges/dir")
		for _, tc := range []struct {
			name string
			err  error
			code agentapi.Code
			says string
		}{
			{"a negative read offset", second(readRange("ranges/kept", -1, 0)), agentapi.CodeInvalid, "offset -1 is negative"},
			{"a length over the limit", second(readRange("ranges/kept", 0, limit+1)), agentapi.CodeInvalid, fmt.Sprintf("give 1 to %d bytes", limit)},
			{"a negative length", second(readRange("ranges/kept", 0, -1)), agentapi.CodeInvalid, "length -1 is out of range"},
			{"a negative write offset", second(writeAt("ranges/kept", -5, []byte("x"))), agentapi.CodeInvalid, "offset -5 is negative"},
			{"an append over the limit", second(appendTo("ranges/kept", make([]byte, limit+1))), agentapi.CodeTooLarge, "in ranges of at most"},
			{"a write at an offset over the limit", second(writeAt("ranges/kept", 0, make([]byte, limit+1))), agentapi.CodeTooLarge, "in ranges of at most"},
			{"reading a range of a missing file", second(readRange("ranges/nope", 0, 0)), agentapi.CodeNotFound, "no such file"},
			{"reading a range of a directory", second(readRange("ranges/dir", 0, 0)), agentapi.CodeInvalid, "not a regular file"},
			{"the digest of a missing file", second(digest("ranges/nope")), agentapi.CodeNotFound, "no such file"},
			{"the digest of a directory", second(digest("ranges/dir")), agentapi.CodeInvalid, "not a regular file"},
			{"appending into a missing directory", second(appendTo("ranges/no/f", []byte("x"))), agentapi.CodeNotFound, "create it first"},
			{"appending to a directory", second(appendTo("ranges/dir", []byte("x"))), agentapi.CodeInvalid, "is a directory"},
			{"writing into a device", second(writeAt("/dev/null", 0, []byte("x"))), agentapi.CodeInvalid, "not a regular file"},
			// As the tenant: the system's files are not its to change.
			{"appending outside the tenant's directories", second(appendTo("/etc/conformance", []byte("x"))), agentapi.CodeInvalid, "not atomic"},
			{"writing outside the tenant's directories", second(writeAt("/etc/conformance", 3, []byte("x"))), agentapi.CodeInvalid, "not atomic"},
		} {
			if hostagent.CodeOf(tc.err) != tc.code || !strings.Contains(fmt.Sprint(tc.err), tc.says) {
				t.Errorf("%s: %v (%s), want %s saying %q", tc.name, tc.err, hostagent.CodeOf(tc.err), tc.code, tc.says)
			}
		}
		if got := s.sh(t, "cat ranges/kept; ls -A ranges/dir; ls /etc/conformance 2>/dev/null; echo"); got != "keep\n" {
			t.Fatalf("refused calls changed the files: %q", got)
		}
	})

	t.Run("ranged pile", func(t *testing.T) {
		n.known(t)
		if !n.be.Capabilities().AppendOnlyPile {
			t.Skip("the backend does not claim an append-only pile")
		}
		name, _, _ := strings.Cut(s.sh(t, "ls "+guestapi.PileDir), "\n")
		if name == "" {
			t.Fatalf("the pile %s has no file", guestapi.PileDir)
		}
		f := guestapi.PileDir + "/" + name
		before := s.sh(t, "cat "+f+"; ls "+guestapi.PileDir)
		s.sh(t, "ln -sf "+f+" ranges/to-pile")
		for _, tc := range []struct {
			name string
			err  error
		}{
			{"appending", second(appendTo(f, []byte("x")))},
			{"writing at an offset", second(writeAt(f, 0, []byte("x")))},
			{"creating a file", second(appendTo(guestapi.PileDir+"/new", []byte("x")))},
			{"appending through a link", second(appendTo("ranges/to-pile", []byte("x")))},
			{"writing through a link", second(writeAt("ranges/to-pile", 0, []byte("x")))},
		} {
			if hostagent.CodeOf(tc.err) != agentapi.CodeInvalid || !strings.Contains(fmt.Sprint(tc.err), "the pile ("+guestapi.PileDir+")") {
				t.Errorf("%s: %v, want invalid_argument saying it is the pile", tc.name, tc.err)
			}
		}
		if got := s.sh(t, "cat "+f+"; ls "+guestapi.PileDir); got != before {
			t.Fatalf("the pile after the refusals: %q, was %q", got, before)
		}
	})
}
