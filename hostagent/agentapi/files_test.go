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

package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/playground-dev/playground/hostagent/bounds"
)

func ptr[T any](v T) *T { return &v }

// TestFileRequestsValidate: a range no file has, a digest of a range, and
// a write both at an offset and appended are refused as invalid, with
// what to give instead; what a file can answer passes.
func TestFileRequestsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		says string // "" for none
	}{
		{"a whole read", ReadRequest{Path: "f"}.Validate(), ""},
		{"a range from the start", ReadRequest{Path: "f", Offset: ptr(int64(0))}.Validate(), ""},
		{"a full range", ReadRequest{Path: "f", Offset: ptr(int64(1 << 40)), Length: bounds.MaxFileBytes}.Validate(), ""},
		{"a digest", ReadRequest{Path: "f", Digest: true}.Validate(), ""},
		{"a negative offset", ReadRequest{Path: "f", Offset: ptr(int64(-1))}.Validate(), "offset -1 is negative"},
		{"a length over the limit", ReadRequest{Path: "f", Length: bounds.MaxFileBytes + 1}.Validate(), "give 1 to 3145728 bytes, or omit it"},
		{"a negative length", ReadRequest{Path: "f", Length: -1}.Validate(), "length -1 is out of range"},
		{"a digest of a range", ReadRequest{Path: "f", Digest: true, Offset: ptr(int64(0))}.Validate(), "ask for the digest without them"},
		{"a digest of a length", ReadRequest{Path: "f", Digest: true, Length: 5}.Validate(), "ask for the digest without them"},
		{"a whole write", WriteRequest{Path: "f"}.Validate(), ""},
		{"an append", WriteRequest{Path: "f", Append: true}.Validate(), ""},
		{"a write at an offset", WriteRequest{Path: "f", Offset: ptr(int64(7))}.Validate(), ""},
		{"a write at a negative offset", WriteRequest{Path: "f", Offset: ptr(int64(-7))}.Validate(), "offset -7 is negative"},
		{"an append at an offset", WriteRequest{Path: "f", Offset: ptr(int64(0)), Append: true}.Validate(), "give one of them, or neither"},
	} {
		switch {
		case tc.says == "" && tc.err != nil:
			t.Errorf("%s: %v, want it accepted", tc.name, tc.err)
		case tc.says != "" && (CodeOf(tc.err) != CodeInvalid || !strings.Contains(tc.err.Error(), tc.says)):
			t.Errorf("%s: %v, want invalid_argument saying %q", tc.name, tc.err, tc.says)
		}
	}
}

// TestFileCallsOnTheWire: each file call sends the fields that select it
// (an offset of 0 among them, which a range needs) and none of the
// others, so that an agent that does not know them refuses the call
// rather than read or replace a whole file; a request no file can answer
// never leaves the client.
func TestFileCallsOnTheWire(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = append(sent, r.URL.Path[strings.LastIndex(r.URL.Path, "/"):]+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"path":"/home/sandbox/f","file_size":42,"sha256":"ab","offset":3,"eof":true}`)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, "token", http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	ctx, h := context.Background(), NewHandle()
	f, err := c.ReadRange(ctx, "t", h, "f", "", 0, 10)
	if err != nil || f.FileSize != 42 || f.Offset != 3 || !f.EOF {
		t.Fatalf("ReadRange: %+v, %v", f, err)
	}
	d, err := c.Digest(ctx, "t", h, "f", "")
	if err != nil || d != (FileDigest{Path: "/home/sandbox/f", FileSize: 42, SHA256: "ab"}) {
		t.Fatalf("Digest: %+v, %v", d, err)
	}
	for _, call := range []func() error{
		func() error { _, err := c.Read(ctx, "t", h, "f", ""); return err },
		func() error { _, err := c.Write(ctx, "t", h, "f", "", []byte("x")); return err },
		func() error { _, err := c.Append(ctx, "t", h, "f", "", []byte("x")); return err },
		func() error { _, err := c.WriteAt(ctx, "t", h, "f", "", 0, []byte("x")); return err },
	} {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`/read {"tenant":"t","path":"f","offset":0,"length":10}`,
		`/read {"tenant":"t","path":"f","digest":true}`,
		`/read {"tenant":"t","path":"f"}`,
		`/write {"tenant":"t","path":"f","data":"eA=="}`,
		`/write {"tenant":"t","path":"f","data":"eA==","append":true}`,
		`/write {"tenant":"t","path":"f","data":"eA==","offset":0}`,
	}
	if strings.Join(sent, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sent\n%s\nwant\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
	}

	sent = nil
	for name, call := range map[string]func() error{
		"a negative read offset":  func() error { _, err := c.ReadRange(ctx, "t", h, "f", "", -1, 0); return err },
		"a length over the limit": func() error { _, err := c.ReadRange(ctx, "t", h, "f", "", 0, bounds.MaxFileBytes+1); return err },
		"a negative write offset": func() error { _, err := c.WriteAt(ctx, "t", h, "f", "", -1, nil); return err },
	} {
		if err := call(); CodeOf(err) != CodeInvalid {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	if len(sent) != 0 {
		t.Fatalf("refused calls were sent: %q", sent)
	}

	// The answers' names.
	b, _ := json.Marshal(FileInfo{Path: "/p", Size: 1, MIME: "m", SHA256: "s", FileSize: 9})
	if string(b) != `{"path":"/p","size":1,"mime":"m","sha256":"s","file_size":9}` {
		t.Fatalf("FileInfo on the wire: %s", b)
	}
}

// TestBinaryRead: a read asks for the binary answer and takes the file's
// exact bytes from it; a header that claims more than an answer holds, an
// answer cut short and bytes past the file's are refused, not trusted.
func TestBinaryRead(t *testing.T) {
	data := []byte("\x00\x01binary\xff bytes\n")
	var body func(w io.Writer)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(VersionHeader, Current.String())
		if r.Header.Get("Accept") != ReadMediaType {
			t.Errorf("the read asked for %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", ReadMediaType)
		body(w)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	c, err := NewClient(srv.URL, "token", nil)
	if err != nil {
		t.Fatal(err)
	}
	header := func(size int) []byte {
		h, _ := json.Marshal(FileContent{Path: "/home/f", Size: size, FileSize: int64(size), EOF: true})
		return append(h, '\n')
	}
	body = func(w io.Writer) { _, _ = w.Write(append(header(len(data)), data...)) }
	f, err := c.Read(context.Background(), "t", NewHandle(), "f", "")
	if err != nil || !bytes.Equal(f.Data, data) || f.Path != "/home/f" || !f.EOF {
		t.Fatalf("read %+v, %v; want the bytes as sent", f, err)
	}
	for name, b := range map[string]func(w io.Writer){
		"a size past any answer": func(w io.Writer) { _, _ = w.Write(header(maxResponseBytes + 1)) },
		"an answer cut short":    func(w io.Writer) { _, _ = w.Write(append(header(100), data...)) },
		"bytes past the file's":  func(w io.Writer) { _, _ = w.Write(append(append(header(2), data...), 'x')) },
	} {
		body = b
		if f, err := c.Read(context.Background(), "t", NewHandle(), "f", ""); err == nil {
			t.Errorf("%s: read %d bytes, want an error", name, len(f.Data))
		}
	}
}
