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

package agentserver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
)

// TestLargeFileInRanges is a client moving a file over one call's payload
// through the API: uploaded by append and by offsets in reverse order,
// downloaded range by range to EOF, each checked against the digest; a
// whole read of it still refused.
func TestLargeFileInRanges(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, "", nil, spec("ranges", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "ranges")
	if err != nil {
		t.Fatal(err)
	}
	const chunk = bounds.MaxFileBytes
	payload := make([]byte, 2*chunk+12345)
	_, _ = rand.Read(payload)
	sum := sha256.Sum256(payload)
	want := hex.EncodeToString(sum[:])
	var starts []int
	for off := 0; off < len(payload); off += chunk {
		starts = append(starts, off)
	}
	part := func(off int) []byte { return payload[off:min(off+chunk, len(payload))] }

	for _, off := range starts {
		info, err := n.client.Append(ctx, "ns/a", h.ID, "up.bin", "", part(off))
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(part(off))
		if info.Size != len(part(off)) || info.SHA256 != hex.EncodeToString(s[:]) || info.FileSize != int64(off+len(part(off))) || !strings.HasSuffix(info.Path, "/up.bin") {
			t.Fatalf("append at %d answered %+v", off, info)
		}
	}
	for i := len(starts) - 1; i >= 0; i-- {
		if _, err := n.client.WriteAt(ctx, "ns/a", h.ID, "placed.bin", "", int64(starts[i]), part(starts[i])); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"up.bin", "placed.bin"} {
		d, err := n.client.Digest(ctx, "ns/a", h.ID, f, "")
		if err != nil {
			t.Fatal(err)
		}
		if d.FileSize != int64(len(payload)) || d.SHA256 != want || !strings.HasSuffix(d.Path, "/"+f) {
			t.Fatalf("the digest of %s: %+v, want %d bytes, %s", f, d, len(payload), want)
		}
	}

	var got []byte
	for off := int64(0); ; {
		f, err := n.client.ReadRange(ctx, "ns/a", h.ID, "up.bin", "", off, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Offset != off || f.FileSize != int64(len(payload)) || f.Size != len(f.Data) {
			t.Fatalf("the range at %d: offset %d, size %d of %d", off, f.Offset, f.Size, f.FileSize)
		}
		got = append(got, f.Data...)
		off += int64(f.Size)
		if f.EOF {
			break
		}
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("downloaded %d bytes that differ from the %d uploaded", len(got), len(payload))
	}
	if f, err := n.client.ReadRange(ctx, "ns/a", h.ID, "up.bin", "", int64(len(payload))+1, 1); err != nil || f.Size != 0 || !f.EOF {
		t.Fatalf("a range past the end: %+v, %v; want no bytes and EOF", f, err)
	}
	if _, err := n.client.Read(ctx, "ns/a", h.ID, "up.bin", ""); codeOf(err) != agentapi.CodeTooLarge {
		t.Fatalf("a whole read of the file: %v, want too_large", err)
	}
}

// TestRangedRequestsRefused: the agent refuses what its client would not
// send (a caller of the API may be anyone with a token) as invalid, with
// what to do, and the file is unchanged.
func TestRangedRequestsRefused(t *testing.T) {
	ctx := context.Background()
	n := startNode(t, "", nil, spec("refused", "ns/a"))
	h, err := n.client.Open(ctx, "ns/a", "refused")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, n, "ns/a", h.ID, "printf keep > kept")
	for _, tc := range []struct{ call, body, says string }{
		{"write", `{"tenant":"ns/a","path":"kept","data":"eA==","append":true,"offset":0}`, "offset and append are both given"},
		{"write", `{"tenant":"ns/a","path":"kept","data":"eA==","offset":-1}`, "offset -1 is negative"},
		{"read", `{"tenant":"ns/a","path":"kept","offset":-1}`, "offset -1 is negative"},
		{"read", `{"tenant":"ns/a","path":"kept","length":3145729}`, "length 3145729 is out of range"},
		{"read", `{"tenant":"ns/a","path":"kept","digest":true,"offset":0}`, "ask for the digest without them"},
	} {
		req, _ := http.NewRequest(http.MethodPost, n.endpoint+"/v1/handles/"+h.ID+"/"+tc.call, strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+gatewayToken)
		req.Header.Set(agentapi.VersionHeader, agentapi.Current.String())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e agentapi.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Code != agentapi.CodeInvalid || !strings.Contains(e.Message, tc.says) {
			t.Errorf("%s %s: %s %+v, want 400 saying %q", tc.call, tc.body, resp.Status, e, tc.says)
		}
	}
	if res := exec(t, n, "ns/a", h.ID, "cat kept"); string(res.Stdout) != "keep" {
		t.Fatalf("a refused call changed the file: %q", res.Stdout)
	}
}
