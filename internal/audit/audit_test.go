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

package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// lockedBuffer is a bytes.Buffer safe for the sink's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

func trailOf(t *testing.T, n int, level Level) []string {
	t.Helper()
	var buf lockedBuffer
	tr := New(level, "gateway", Writer("stdout", &buf, 0))
	for i := range n {
		exit := i
		tr.Record(Record{Tenant: "team-a/alice", Identity: "token of team-a/alice", Session: "s1", Tool: "exec",
			Command: fmt.Sprintf("echo %d", i), Outcome: "ok", DurationMS: 1.5, BytesIn: 20, BytesOut: 2, ExitCode: &exit, Node: "n1", Sandbox: "sbx-1"})
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.lines()
}

func verify(lines []string) (Report, error) {
	return Verify(strings.NewReader(strings.Join(lines, "\n") + "\n"))
}

// TestVerifyDetectsTampering: a trail verifies as written; a record
// altered, removed, reordered or repeated does not.
func TestVerifyDetectsTampering(t *testing.T) {
	lines := trailOf(t, 6, LevelRequestResult)
	if len(lines) != 6 {
		t.Fatalf("%d lines for 6 records", len(lines))
	}
	rep, err := verify(lines)
	if err != nil || rep.Records != 6 || rep.Chains != 1 {
		t.Fatalf("the trail as written: %+v, %v", rep, err)
	}
	var rec Record
	if err := json.Unmarshal([]byte(lines[2]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Command != "echo 2" || rec.Seq != 3 || rec.Prev == "" || *rec.ExitCode != 2 || rec.Component != "gateway" {
		t.Fatalf("record 3: %+v", rec)
	}
	altered := strings.Replace(lines[2], `"echo 2"`, `"echo 9"`, 1)
	for name, c := range map[string]struct {
		lines []string
		want  string
	}{
		"altered":   {append(append(append([]string{}, lines[:2]...), altered), lines[3:]...), "was altered"},
		"removed":   {append(append([]string{}, lines[:2]...), lines[3:]...), "records 3-3 of chain"},
		"reordered": {[]string{lines[0], lines[2], lines[1], lines[3]}, "missing"},
		"repeated":  {[]string{lines[0], lines[1], lines[1], lines[2]}, "reordered or repeated"},
		"not json":  {[]string{lines[0], "rm -rf /"}, "not an audit record"},
	} {
		if _, err := verify(c.lines); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", name, err, c.want)
		}
	}
}

// TestLevels: Metadata keeps no command; Request no sizes.
func TestLevels(t *testing.T) {
	for level, absent := range map[Level][]string{
		LevelMetadata: {`"command"`, `"bytesIn"`, `"exitCode"`},
		LevelRequest:  {`"bytesIn"`, `"exitCode"`},
	} {
		lines := trailOf(t, 1, level)
		for _, a := range absent {
			if strings.Contains(lines[0], a) {
				t.Errorf("level %s keeps %s: %s", level, a, lines[0])
			}
		}
		if _, err := verify(lines); err != nil {
			t.Errorf("level %s: %v", level, err)
		}
	}
}

// TestDeadWebhookNeverHoldsCalls: with a webhook that takes nothing, a
// burst of records is recorded at once; what the sink dropped is
// counted, and the stream it delivers once the endpoint answers again
// says where it has a gap, which Verify reports without failing.
func TestDeadWebhookNeverHoldsCalls(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var got bytes.Buffer
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got.Write(body)
		mu.Unlock()
	}))
	defer srv.Close()
	before := droppedByWebhook(t)
	tr := New(LevelMetadata, "gateway", Webhook(WebhookOptions{URL: srv.URL, Queue: 8, Client: &http.Client{Timeout: time.Minute}}))
	done := make(chan struct{})
	go func() {
		for range 200 {
			tr.Record(Record{Tenant: "t", Tool: "exec", Outcome: "ok"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("recording waited on a webhook that does not answer")
	}
	dropped := droppedByWebhook(t) - before
	if dropped < 150 {
		t.Fatalf("%v records counted dropped of 200 into a queue of 8 behind a dead endpoint", dropped)
	}
	close(release)
	// Once the endpoint answers again, the next record the sink takes
	// says how many it dropped.
	for i := 0; ; i++ {
		tr.Record(Record{Tenant: "t", Tool: "exec", Outcome: "ok"})
		mu.Lock()
		announced := bytes.Contains(got.Bytes(), []byte(`"missed":`))
		mu.Unlock()
		if announced {
			break
		}
		if i == 600 {
			t.Fatal("no record delivered after the gap says what was dropped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	rep, err := Verify(&got)
	if err != nil || len(rep.Announced) == 0 {
		t.Fatalf("the webhook's stream: %+v, %v; want it whole but for announced gaps", rep, err)
	}
}

// TestFileRotates: a file sink rotates by size and the files, oldest
// first, verify as one stream.
func TestFileRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	s, err := File(FileOptions{Path: path, MaxBytes: 4 << 10, MaxBackups: 50})
	if err != nil {
		t.Fatal(err)
	}
	tr := New(LevelRequest, "gateway", s)
	for i := range 100 {
		tr.Record(Record{Tenant: "t", Tool: "exec", Command: fmt.Sprintf("echo %d", i), Outcome: "ok"})
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(path + ".*")
	if len(matches) < 2 {
		t.Fatalf("%d rotated files for ~30 KiB at 4 KiB each", len(matches))
	}
	var all bytes.Buffer
	for i := len(matches); i >= 1; i-- {
		b, err := os.ReadFile(fmt.Sprintf("%s.%d", path, i))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	b, _ := os.ReadFile(path)
	all.Write(b)
	rep, err := Verify(&all)
	if err != nil || rep.Records != 100 {
		t.Fatalf("the rotated files in order: %+v, %v", rep, err)
	}
}

func droppedByWebhook(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := RecordsTotal.WithLabelValues("webhook", "dropped").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
