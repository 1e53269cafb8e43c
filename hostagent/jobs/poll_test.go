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

package jobs

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/backendtest"
)

func TestPollPagesAndDone(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	if info.State != StateRunning || info.Result != nil {
		t.Fatalf("Start info %+v", info)
	}
	p.sink.Write(backend.Stdout, []byte("hello "))
	p.sink.Write(backend.Stdout, []byte("world\n"))
	p.sink.Write(backend.Stderr, []byte("warning\n"))

	r := h.poll("a", info.ID, "", 0)
	if len(r.Chunks) != 2 || string(r.Chunks[0].Data) != "hello world\n" || r.Chunks[0].Stream != backend.Stdout ||
		r.Chunks[1].Seq != 1 || string(r.Chunks[1].Data) != "warning\n" || r.Done || r.Job.State != StateRunning {
		t.Fatalf("first page %+v", r)
	}
	// Nothing new: an empty page, same cursor.
	r2 := h.poll("a", info.ID, r.NextCursor, 0)
	if len(r2.Chunks) != 0 || r2.NextCursor != r.NextCursor || r2.Done {
		t.Fatalf("empty page %+v", r2)
	}
	h.finish(info.ID, p, 3)
	r3 := h.poll("a", info.ID, r.NextCursor, 0)
	if !r3.Done || r3.Job.State != StateExited || r3.Job.Result == nil || r3.Job.Result.ExitCode != 3 || r3.Job.EndedAt.IsZero() {
		t.Fatalf("final page %+v", r3)
	}
	if string(r.Chunks[0].Data) != "hello world\n" || r.Chunks[1].Stream != backend.Stderr {
		t.Fatalf("chunks %+v", r.Chunks)
	}
}

func TestPollMaxBytes(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	data := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	p.sink.Write(backend.Stdout, data)
	h.finish(info.ID, p, 0)

	// Budgets that split chunks: nothing lost, nothing repeated.
	var got []byte
	cur := ""
	for pages := 0; ; pages++ {
		r := h.poll("a", info.ID, cur, 100_000)
		n := 0
		for _, c := range r.Chunks {
			n += len(c.Data)
			got = append(got, c.Data...)
		}
		if n > 100_000 {
			t.Fatalf("page of %d bytes over a 100000 budget", n)
		}
		cur = r.NextCursor
		if r.Done {
			break
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data differs")
	}
	// maxBytes <= 0 means the 1 MiB default; larger than the cap means the
	// cap. A page fills its budget but for the bytes of a character it
	// would split (the holder's pages stop short of one).
	for _, tc := range []struct{ ask, want int }{{0, 1 << 20}, {-5, 1 << 20}, {1 << 30, 3 << 20}} {
		r := h.poll("a", info.ID, "", tc.ask)
		n := 0
		for _, c := range r.Chunks {
			n += len(c.Data)
		}
		if n > tc.want || n <= tc.want-utf8.UTFMax {
			t.Errorf("maxBytes %d: page of %d bytes, want %d (less at most the bytes of a split character)", tc.ask, n, tc.want)
		}
	}
}

func TestPollBadCursor(t *testing.T) {
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	p.sink.Write(backend.Stdout, []byte("0123456789"))
	r := h.poll("a", info.ID, "", 0) // cursor 1.10: at the end
	if r.NextCursor != "1.10" {
		t.Fatalf("next cursor %q", r.NextCursor)
	}
	for _, cur := range []string{"2.10", "1.11", "1.9", "0.11", "999999.0", "garbage", "1.10 "} {
		_, err := h.m.Poll(context.Background(), "a", info.ID, cur, 0, 0)
		if !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: %v, want ErrBadCursor", cur, err)
		}
		if err != nil && !strings.Contains(err.Error(), "next_cursor") {
			t.Errorf("cursor %q: message %q does not say what to do", cur, err)
		}
	}
	// Mid-chunk cursors are valid; the rest of the chunk comes at its seq.
	r = h.poll("a", info.ID, "0.4", 0)
	if len(r.Chunks) != 1 || r.Chunks[0].Offset != 4 || string(r.Chunks[0].Data) != "456789" {
		t.Fatalf("from 0.4: %+v", r.Chunks)
	}
}

// TestPollGap: output evicted before the client read it is reported as a
// gap with exact counts, and the poll continues after it.
func TestPollGap(t *testing.T) {
	h := newHarness(t, Limits{RingBytes: 1000, ChunkBytes: 100})
	info, p := h.start("a", nil)
	p.sink.Write(backend.Stdout, bytes.Repeat([]byte("o"), 300)) // chunks 0-2
	r := h.poll("a", info.ID, "", 150)                           // all of 0, half of 1
	if r.NextCursor != "1.150" || r.Gap != nil {
		t.Fatalf("first page: next %q gap %+v", r.NextCursor, r.Gap)
	}
	p.sink.Write(backend.Stderr, bytes.Repeat([]byte("e"), 1000)) // chunks 3-12 evict 0-2
	r = h.poll("a", info.ID, r.NextCursor, 0)
	want := Gap{FromSeq: 1, ToSeq: 3, Chunks: 2, Bytes: 150}
	if r.Gap == nil || *r.Gap != want {
		t.Fatalf("gap %+v, want %+v", r.Gap, want)
	}
	if r.DroppedBytes != 300 || r.DroppedChunks != 3 {
		t.Fatalf("dropped %d bytes %d chunks, want 300 and 3", r.DroppedBytes, r.DroppedChunks)
	}
	if len(r.Chunks) != 10 || r.Chunks[0].Seq != 3 || r.Chunks[0].Stream != backend.Stderr {
		t.Fatalf("after the gap: %d chunks from %d", len(r.Chunks), r.Chunks[0].Seq)
	}
	// A poll from the start reports everything dropped so far.
	r = h.poll("a", info.ID, "", 0)
	if want := (Gap{FromSeq: 0, ToSeq: 3, Chunks: 3, Bytes: 300}); r.Gap == nil || *r.Gap != want {
		t.Fatalf("gap from start %+v, want %+v", r.Gap, want)
	}
	// The holder's totals reach the stats when the job ends.
	h.finish(info.ID, p, 0)
	if s := h.m.Stats(); s.DroppedBytes != 300 || s.Evictions != 3 || s.OutputBytes != 1300 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRoundTrip: random binary and UTF-8 output, written in random pieces
// to both streams (splitting characters), comes back byte for byte through
// pages of random size, the text/base64 encoding and JSON.
func TestRoundTrip(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := newHarness(t, Limits{ChunkBytes: 1 + rng.IntN(4096)})
		info, p := h.start("a", nil)
		want := map[backend.Stream][]byte{}
		total := 0
		for total < 512<<10 {
			var piece []byte
			if rng.IntN(2) == 0 {
				piece = make([]byte, rng.IntN(3000))
				for i := range piece {
					piece[i] = byte(rng.Uint32())
				}
			} else {
				var sb strings.Builder
				for sb.Len() < rng.IntN(3000) {
					sb.WriteRune([]rune("aé€𝄞\n\x00")[rng.IntN(6)])
				}
				piece = []byte(sb.String())
			}
			s := backend.Stream(1 + rng.IntN(2))
			// Write it in random sub-pieces that may split characters.
			for len(piece) > 0 {
				n := min(len(piece), 1+rng.IntN(200))
				p.sink.Write(s, piece[:n])
				want[s] = append(want[s], piece[:n]...)
				total += n
				piece = piece[n:]
			}
		}
		h.finish(info.ID, p, 0)

		got := map[backend.Stream][]byte{}
		cur := ""
		texts := 0
		for {
			r, err := h.m.Poll(context.Background(), "a", info.ID, cur, 1+rng.IntN(64<<10), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Chunks {
				// Chunks cut at character boundaries stay valid UTF-8,
				// so that the agent's answer can carry them as text.
				if utf8.Valid(c.Data) {
					texts++
				}
				got[c.Stream] = append(got[c.Stream], c.Data...)
			}
			if r.Gap != nil {
				t.Fatalf("seed %d: unexpected gap %+v", seed, r.Gap)
			}
			cur = r.NextCursor
			if r.Done {
				break
			}
		}
		for _, s := range []backend.Stream{backend.Stdout, backend.Stderr} {
			if !bytes.Equal(got[s], want[s]) {
				t.Fatalf("seed %d: %s differs (%d vs %d bytes)", seed, s, len(got[s]), len(want[s]))
			}
		}
		if texts == 0 {
			t.Fatalf("seed %d: no chunk went as text", seed)
		}
	}
}

// waiting reports whether a long poll is parked on the job, in its holder.
func (h *harness) waiting(id string) bool {
	holder, ok := h.holders.Load(id)
	return ok && holder.(*backendtest.Holder).Waiting(id)
}

type pollOutcome struct {
	r   PollResult
	err error
}

func (h *harness) longPoll(ctx context.Context, id, cur string, wait time.Duration) <-chan pollOutcome {
	ch := make(chan pollOutcome, 1)
	go func() {
		r, err := h.m.Poll(ctx, "a", id, cur, 0, wait)
		ch <- pollOutcome{r, err}
	}()
	eventually(h.t, "the poll to wait", func() bool { return h.waiting(id) })
	return ch
}

func receive(t *testing.T, ch <-chan pollOutcome) pollOutcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("long poll did not return")
		return pollOutcome{}
	}
}

func TestLongPoll(t *testing.T) {
	t.Run("wakes on output", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, p := h.start("a", nil)
		ch := h.longPoll(context.Background(), info.ID, "", 30*time.Second)
		p.sink.Write(backend.Stdout, []byte("hi"))
		o := receive(t, ch)
		if o.err != nil || len(o.r.Chunks) != 1 || string(o.r.Chunks[0].Data) != "hi" {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("wakes on termination", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, p := h.start("a", nil)
		ch := h.longPoll(context.Background(), info.ID, "", 30*time.Second)
		p.exit(backend.ExitStatus{ExitCode: 0, Signal: ""}, nil)
		o := receive(t, ch)
		if o.err != nil || !o.r.Done || o.r.Job.State != StateExited || o.r.Job.Result.ExitCode != 0 {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("wakes on the kill's end", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, p := h.start("a", func(p *fakeProc) { p.killGate = make(chan struct{}) })
		ch := h.longPoll(context.Background(), info.ID, "", 30*time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // do not wait for the kill
		if ci, err := h.m.Cancel(ctx, "a", info.ID); err != nil || ci.State != StateCancelling {
			t.Fatalf("Cancel: %+v %v", ci, err)
		}
		close(p.killGate)
		o := receive(t, ch)
		if o.err != nil || o.r.Job.State != StateKilled || !o.r.Done {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("times out empty", func(t *testing.T) {
		// The holder waits, in the sandbox, on its own clock.
		h := newHarness(t, Limits{})
		info, _ := h.start("a", nil)
		start := time.Now()
		ch := h.longPoll(context.Background(), info.ID, "", 200*time.Millisecond)
		o := receive(t, ch)
		if o.err != nil || len(o.r.Chunks) != 0 || o.r.Done || o.r.NextCursor != "0.0" {
			t.Fatalf("%+v", o)
		}
		if waited := time.Since(start); waited < 200*time.Millisecond {
			t.Fatalf("returned after %v, before its wait", waited)
		}
	})
	t.Run("wait is capped", func(t *testing.T) {
		h := newHarness(t, Limits{MaxPollWait: 100 * time.Millisecond})
		info, _ := h.start("a", nil)
		ch := h.longPoll(context.Background(), info.ID, "", 24*time.Hour)
		if o := receive(t, ch); o.err != nil {
			t.Fatal(o.err)
		}
	})
	t.Run("honors ctx", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, _ := h.start("a", nil)
		ctx, cancel := context.WithCancel(context.Background())
		ch := h.longPoll(ctx, info.ID, "", 30*time.Second)
		cancel()
		if o := receive(t, ch); !errors.Is(o.err, context.Canceled) {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("ends on close", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, _ := h.start("a", nil)
		ch := h.longPoll(context.Background(), info.ID, "", 30*time.Second)
		go h.m.Close(context.Background())
		if o := receive(t, ch); !errors.Is(o.err, ErrClosed) {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("terminal job does not wait", func(t *testing.T) {
		h := newHarness(t, Limits{})
		info, p := h.start("a", nil)
		h.finish(info.ID, p, 0)
		r, err := h.m.Poll(context.Background(), "a", info.ID, "", 0, 30*time.Second)
		if err != nil || !r.Done {
			t.Fatalf("%+v %v", r, err)
		}
	})
}
