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

package hostagent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

// gvisorFake offers gVisor isolation, as the oci backend with runsc does.
type gvisorFake struct{ *backendtest.Fake }

func (g gvisorFake) Capabilities() backend.Capabilities {
	c := g.Fake.Capabilities()
	c.Isolator = g
	return c
}

func (gvisorFake) Isolations() []string {
	return []string{backend.IsolationContainer, backend.IsolationGVisor}
}

// TestWriteToThePileSaysWhy: write cannot put a file in the pile (it
// replaces files, which the pile refuses), and says so; under gVisor it
// says that the pile is read-only. The sandbox's side (the script finds
// the file's directory in the pile, exit 71) is the gateway's test on
// runc; here the backend answers as that script does.
func TestWriteToThePileSaysWhy(t *testing.T) {
	be := gvisorFake{backendtest.New("oci", func(_ string, req backend.ExecRequest, _ backend.Sink) (int, error) {
		// The whole write's script, and the ranged writes' (which
		// follow a link to see whether it leads into the pile).
		if strings.Contains(req.Command, ".playground-write.") || strings.Contains(req.Command, "readlink -f") {
			return 71, nil
		}
		return 0, nil
	})}
	a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ isolation, want, ranged string }{
		{"", "is in the pile (/pile), which is append-only: write replaces whole files, which the pile refuses",
			"is, or links to, a file in the pile (/pile), which is append-only: write does not write there, not even by append or at an offset"},
		{backend.IsolationGVisor, "is in the pile (/pile), which is read-only under gVisor isolation", "is in the pile (/pile), which is read-only under gVisor isolation"},
	} {
		spec := backend.Spec{ID: "sbx-" + tc.isolation + "x", Tenant: "ns/t" + tc.isolation, Isolation: tc.isolation}
		h := hostagent.EnsureOpen(ctx, t, a, spec)
		_, err = a.Files().WriteFile(ctx, spec.Tenant, h.ID, "/pile/x", "", []byte("y"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `"/pile/x"`) {
			t.Errorf("isolation %q: %v, want %q", tc.isolation, err, tc.want)
		}
		for what, err := range map[string]error{
			"append":       second(a.Files().AppendFile(ctx, spec.Tenant, h.ID, "/pile/x", "", []byte("y"))),
			"write at 0":   second(a.Files().WriteFileAt(ctx, spec.Tenant, h.ID, "/pile/x", "", 0, []byte("y"))),
			"via the link": second(a.Files().AppendFile(ctx, spec.Tenant, h.ID, "to-pile", "", []byte("y"))),
		} {
			if hostagent.CodeOf(err) != agentapi.CodeInvalid || !strings.Contains(err.Error(), tc.ranged) {
				t.Errorf("isolation %q, %s: %v, want %q", tc.isolation, what, err, tc.ranged)
			}
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestRangedCallsCheckFirst: a range no file has, or a payload over the
// limit, is refused with what to do before anything runs in the sandbox.
func TestRangedCallsCheckFirst(t *testing.T) {
	be := backendtest.New("fake", backendtest.Writes())
	a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}, MaxFileBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := backend.Spec{ID: "sbx-ranges", Tenant: "ns/t"}
	h := hostagent.EnsureOpen(ctx, t, a, spec)
	read := func(off int64, n int) error {
		_, err := a.Files().ReadFileRange(ctx, spec.Tenant, h.ID, "f", "", hostagent.Range{Offset: off, Length: n})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		code agentapi.Code
		says string
	}{
		{"a negative offset", read(-1, 0), agentapi.CodeInvalid, "offset -1 is negative: give the byte offset from the start of the file, 0 or more"},
		{"a length over the limit", read(0, 17), agentapi.CodeInvalid, "length 17 is out of range: give 1 to 16 bytes, or omit it for up to 16"},
		{"a negative length", read(0, -1), agentapi.CodeInvalid, "length -1 is out of range"},
		{"no path", second(a.Files().DigestFile(ctx, spec.Tenant, h.ID, "", "")), agentapi.CodeInvalid, "path is empty"},
		{"a negative write offset", second(a.Files().WriteFileAt(ctx, spec.Tenant, h.ID, "f", "", -2, []byte("x"))), agentapi.CodeInvalid, "offset -2 is negative"},
		{"an append over the limit", second(a.Files().AppendFile(ctx, spec.Tenant, h.ID, "f", "", make([]byte, 17))), agentapi.CodeTooLarge, "write it in ranges of at most 16 bytes"},
		{"a write at an offset over the limit", second(a.Files().WriteFileAt(ctx, spec.Tenant, h.ID, "f", "", 0, make([]byte, 17))), agentapi.CodeTooLarge, "write it in ranges of at most 16 bytes"},
	} {
		if hostagent.CodeOf(tc.err) != tc.code || tc.err == nil || !strings.Contains(tc.err.Error(), tc.says) {
			t.Errorf("%s: %v (%s), want %s saying %q", tc.name, tc.err, hostagent.CodeOf(tc.err), tc.code, tc.says)
		}
	}
	if ran := be.Ran(spec.ID); len(ran) != 0 {
		t.Fatalf("refused calls ran %q", ran)
	}
}

// TestRangedReadAnswers: how a range's answer is read from what the
// sandbox's script prints: the file's size (BSD's wc puts blanks before
// it) and path on stderr, the bytes on stdout.
func TestRangedReadAnswers(t *testing.T) {
	var stdout, stderr string
	be := backendtest.New("fake", func(_ string, _ backend.ExecRequest, sink backend.Sink) (int, error) {
		sink.Write(backend.Stdout, []byte(stdout))
		sink.Write(backend.Stderr, []byte(stderr))
		return 0, nil
	})
	a, err := hostagent.New(hostagent.Options{Backends: []backend.Backend{be}, MaxFileBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := backend.Spec{ID: "sbx-answers", Tenant: "ns/t"}
	h := hostagent.EnsureOpen(ctx, t, a, spec)
	for _, tc := range []struct {
		name           string
		off            int64
		length         int
		stdout, stderr string
		want           hostagent.FileContent
		code           agentapi.Code
	}{
		{"the last bytes", 90, 0, "0123456789", "     100\n/home/sandbox/f", hostagent.FileContent{Path: "/home/sandbox/f", Size: 10, FileSize: 100, Offset: 90, EOF: true}, ""},
		{"a full range", 0, 4, "abcd", "100\n/home/sandbox/f", hostagent.FileContent{Path: "/home/sandbox/f", Size: 4, FileSize: 100, EOF: false}, ""},
		{"past the end", 500, 0, "", "100\n/home/sandbox/f", hostagent.FileContent{Path: "/home/sandbox/f", FileSize: 100, Offset: 500, EOF: true}, ""},
		{"a file that grew", 98, 0, "0123", "100\n/home/sandbox/f", hostagent.FileContent{Path: "/home/sandbox/f", Size: 4, FileSize: 102, Offset: 98, EOF: true}, ""},
		{"a path that is not one", 0, 4, "abcd", "100\nnot\nabsolute", hostagent.FileContent{Path: "f", Size: 4, FileSize: 100}, ""},
		{"a short read before the end", 0, 0, "abc", "100\n/home/sandbox/f", hostagent.FileContent{}, agentapi.CodeUnavailable},
		{"no size", 0, 0, "abc", "", hostagent.FileContent{}, agentapi.CodeInternal},
	} {
		stdout, stderr = tc.stdout, tc.stderr
		got, err := a.Files().ReadFileRange(ctx, spec.Tenant, h.ID, "f", "", hostagent.Range{Offset: tc.off, Length: tc.length})
		if hostagent.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want code %q", tc.name, err, tc.code)
			continue
		}
		if err != nil {
			continue
		}
		if got.Path != tc.want.Path || got.Size != tc.want.Size || string(got.Data) != tc.stdout || got.FileSize != tc.want.FileSize ||
			got.Offset != tc.want.Offset || got.EOF != tc.want.EOF {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
