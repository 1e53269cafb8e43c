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

package workers

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	_, _ = rand.Read(k)
	return k
}

// A sealed session opens for its tenant and mapping only, under the keys
// of a rotation, and never shows the worker's ID.
func TestSealedSessions(t *testing.T) {
	old, cur := newKey(t), newKey(t)
	before, _ := StaticKeys(old)
	rotated, _ := StaticKeys(cur, old)
	after, _ := StaticKeys(cur)
	s := Session{Upstream: "WORKER-SESSION-42", Endpoint: "http://10.0.0.7:8080/mcp", Issued: time.Unix(1700000000, 0)}

	public, err := before.Seal("ns/alice", "uid-1", s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(public, s.Upstream) || strings.ContainsFunc(public, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		t.Fatalf("public ID %q shows the worker's or is no visible ASCII", public)
	}
	if again, _ := before.Seal("ns/alice", "uid-1", s); again == public {
		t.Error("two seals of one session are equal: the nonce is not fresh")
	}
	got, err := rotated.Open("ns/alice", "uid-1", public)
	if err != nil || got != s {
		t.Fatalf("opened after rotation: %+v, %v; want %+v", got, err, s)
	}
	for _, c := range []struct {
		what        string
		keys        *Keys
		tenant, uid string
		public      string
	}{
		{"another tenant", rotated, "ns/mallory", "uid-1", public},
		{"a tenant of the same name elsewhere", rotated, "other/alice", "uid-1", public},
		{"a recreated mapping", rotated, "ns/alice", "uid-2", public},
		{"the previous key retired", after, "ns/alice", "uid-1", public},
		{"a flipped character", rotated, "ns/alice", "uid-1", flip(public)},
		{"not base64", rotated, "ns/alice", "uid-1", "not a session!"},
		{"empty", rotated, "ns/alice", "uid-1", ""},
		{"too long", rotated, "ns/alice", "uid-1", strings.Repeat("A", 8000)},
	} {
		if _, err := c.keys.Open(c.tenant, c.uid, c.public); !errors.Is(err, errBadSession) {
			t.Errorf("%s: opened (%v)", c.what, err)
		}
	}
	// New sessions are sealed with the first key.
	sealed, _ := rotated.Seal("ns/alice", "uid-1", s)
	if _, err := after.Open("ns/alice", "uid-1", sealed); err != nil {
		t.Errorf("a session sealed after the rotation does not open with the new key: %v", err)
	}
	for _, bad := range []string{"", "with space", "tab\t", strings.Repeat("x", maxUpstreamID+1), "é"} {
		if _, err := rotated.Seal("ns/alice", "uid-1", Session{Upstream: bad}); err == nil {
			t.Errorf("sealed the worker session ID %q", bad)
		}
	}
}

func flip(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// The key file: keys in base64, the first sealing; a file that appears
// later, or changes, is taken up; a bad change keeps the previous keys.
func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	k1, k2 := newKey(t), newKey(t)
	write := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range [][]string{{}, {"not-base64!"}, {base64.StdEncoding.EncodeToString(k1[:16])}} {
		write(bad...)
		if _, err := LoadKeys(path, logr.Discard()); err == nil {
			t.Errorf("loaded a key file of %q", bad)
		}
	}

	// Absent at start: a generated key, then the file once it appears,
	// still opening what the generated key sealed.
	os.Remove(path)
	keys, err := LoadKeys(path, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	early, _ := keys.Seal("ns/t", "u", Session{Upstream: "early"})
	write(base64.RawURLEncoding.EncodeToString(k1))
	keys.checked = time.Time{} // due for a re-read
	late, _ := keys.Seal("ns/t", "u", Session{Upstream: "late"})
	only1, _ := StaticKeys(k1)
	if _, err := only1.Open("ns/t", "u", late); err != nil {
		t.Errorf("not sealing with the file's key once it appeared: %v", err)
	}
	if _, err := keys.Open("ns/t", "u", early); err != nil {
		t.Errorf("a session sealed with the generated key no longer opens: %v", err)
	}

	// A rotation: the new key first, the previous below.
	write(base64.StdEncoding.EncodeToString(k2), base64.StdEncoding.EncodeToString(k1))
	keys.checked = time.Time{}
	if _, err := keys.Open("ns/t", "u", late); err != nil {
		t.Errorf("the previous key no longer opens: %v", err)
	}
	rotated, _ := keys.Seal("ns/t", "u", Session{Upstream: "rotated"})
	only2, _ := StaticKeys(k2)
	if _, err := only2.Open("ns/t", "u", rotated); err != nil {
		t.Errorf("not sealing with the new key: %v", err)
	}
	// A bad write keeps the keys.
	write("garbage")
	keys.checked = time.Time{}
	if _, err := keys.Open("ns/t", "u", rotated); err != nil {
		t.Errorf("a bad key file dropped the keys: %v", err)
	}
}

// requestID finds the id to answer a request with, and only of requests.
func TestRequestID(t *testing.T) {
	for _, c := range []struct {
		body, id string
		ok       bool
	}{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, `7`, true},
		{`{"jsonrpc":"2.0","id":"a-b","method":"tools/call"}`, `"a-b"`, true},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, ``, false},
		{`{"jsonrpc":"2.0","id":null,"method":"x"}`, ``, false},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, ``, false},
		{`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, ``, false},
		{`not json`, ``, false},
	} {
		id, ok := requestID([]byte(c.body))
		if ok != c.ok || string(id) != c.id {
			t.Errorf("requestID(%s) = %s, %v; want %s, %v", c.body, id, ok, c.id, c.ok)
		}
	}
	var e struct {
		ID    json.RawMessage
		Error struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(rpcError(json.RawMessage(`"x"`), CodeOutcomeUnknown, "m"), &e); err != nil || !bytes.Equal(e.ID, []byte(`"x"`)) || e.Error.Code != CodeOutcomeUnknown {
		t.Errorf("rpcError: %+v %v", e, err)
	}
}
