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
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// TestGiBOutputBoundedMemory is DESIGN.md's acceptance: a job writing 1 GiB
// with nobody reading keeps memory bounded, and the poll reports the
// dropped bytes.
func TestGiBOutputBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1 GiB")
	}
	const total, write = 1 << 30, 64 << 10
	h := newHarness(t, Limits{})
	info, p := h.start("a", nil)
	buf := make([]byte, write)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	runtime.GC()
	var ms runtime.MemStats
	var peak uint64
	for i := range total / write {
		p.sink.Write(backend.Stdout, buf)
		if i%512 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapInuse)
	if peak >= 64<<20 {
		t.Fatalf("heap in use peaked at %d MiB writing 1 GiB", peak>>20)
	}
	t.Logf("heap in use peaked at %.1f MiB", float64(peak)/(1<<20))

	h.finish(info.ID, p, 0)
	r := h.poll("a", info.ID, "", DefaultMaxPollBytes)
	kept := 0
	for _, c := range r.Chunks {
		kept += len(c.Data)
	}
	if !r.Done || kept != DefaultRingBytes {
		t.Fatalf("done %v, kept %d bytes, want the whole 4 MiB ring in one page", r.Done, kept)
	}
	if r.DroppedBytes != total-uint64(kept) || r.Gap == nil || r.Gap.Bytes != r.DroppedBytes || r.Gap.Chunks != r.DroppedChunks {
		t.Fatalf("dropped %d bytes (gap %+v), want %d", r.DroppedBytes, r.Gap, total-kept)
	}
	if s := h.m.Stats(); s.OutputBytes != total || s.DroppedBytes != r.DroppedBytes {
		t.Fatalf("stats %+v", s)
	}
}

// TestConcurrentProducersAndPollers runs many jobs whose two streams are
// written concurrently, each by its own goroutine, while pollers long-poll
// them, others read stats, and some jobs are cancelled. Run it with -race.
// Each stream is a sequence of 8-byte counters, so any reordering, loss or
// duplication within a stream shows.
func TestConcurrentProducersAndPollers(t *testing.T) {
	m, err := New(Limits{}, nil) // the real clock: long polls really wait
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())

	const tenants, jobsPerTenant, writes = 4, 4, 300
	var wg sync.WaitGroup
	for ti := range tenants {
		tenant := string(rune('a' + ti))
		for ji := range jobsPerTenant {
			var p *fakeProc
			info, err := startOn(t, m, tenant, "sb", func(s backend.Sink) (backend.Process, error) {
				p = newFakeProc(s)
				return p, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			cancelIt := ji == 0
			var producers sync.WaitGroup
			for _, s := range []backend.Stream{backend.Stdout, backend.Stderr} {
				producers.Add(1)
				wg.Add(1)
				go func(seed uint64) {
					defer wg.Done()
					defer producers.Done()
					rng := rand.New(rand.NewPCG(seed, 1))
					var next uint64
					rec := make([]byte, 16*8)
					for range writes {
						n := 1 + rng.IntN(16)
						for k := range n {
							binary.BigEndian.PutUint64(rec[k*8:], next)
							next++
						}
						p.sink.Write(s, rec[:n*8])
					}
				}(uint64(ti*100 + ji*10 + int(s)))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				producers.Wait()
				p.exit(backend.ExitStatus{ExitCode: 0}, nil)
			}()
			wg.Add(1)
			go func() {
				defer wg.Done()
				pollJob(t, m, tenant, info.ID, cancelIt)
			}()
		}
	}
	stop := make(chan struct{})
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		for {
			select {
			case <-stop:
				return
			default:
				s := m.Stats()
				if s.Active < 0 || s.Retained > DefaultRetainedPerAgent {
					t.Errorf("stats %+v", s)
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-statsDone
	if s := m.Stats(); s.Active != 0 || s.Started != tenants*jobsPerTenant {
		t.Fatalf("stats %+v", s)
	}
}

// pollJob long-polls a job to its end, checking that each stream is an
// unbroken counter sequence.
func pollJob(t *testing.T, m *Manager, tenant, id string, cancelIt bool) {
	expect := map[backend.Stream]uint64{}
	partial := map[backend.Stream][]byte{}
	cur := ""
	for pages := 0; ; pages++ {
		if cancelIt && pages == 3 {
			if _, err := m.Cancel(context.Background(), tenant, id); err != nil {
				t.Errorf("cancel %s: %v", id, err)
			}
		}
		r, err := m.Poll(context.Background(), tenant, id, cur, 1+pages*997%(64<<10), 50*time.Millisecond)
		if err != nil {
			t.Errorf("poll %s: %v", id, err)
			return
		}
		if r.Gap != nil {
			t.Errorf("poll %s: gap %+v", id, r.Gap)
			return
		}
		for _, c := range r.Chunks {
			b := append(partial[c.Stream], c.Data...)
			for len(b) >= 8 {
				if v := binary.BigEndian.Uint64(b); v != expect[c.Stream] {
					t.Errorf("job %s %s: counter %d, want %d", id, c.Stream, v, expect[c.Stream])
					return
				}
				expect[c.Stream]++
				b = b[8:]
			}
			partial[c.Stream] = append([]byte(nil), b...)
		}
		cur = r.NextCursor
		if r.Done {
			if !cancelIt && (len(partial[backend.Stdout]) != 0 || len(partial[backend.Stderr]) != 0) {
				t.Errorf("job %s ended mid-record", id)
			}
			// Acknowledge, as a well-behaved client does.
			if _, err := m.Poll(context.Background(), tenant, id, cur, 0, 0); err != nil && !errors.Is(err, ErrNotFound) {
				t.Errorf("ack %s: %v", id, err)
			}
			return
		}
	}
}

// FuzzPoll drives Poll with arbitrary cursors, budgets and waits against a
// job whose output has been partly evicted: it never panics, refuses bad
// cursors with ErrBadCursor, keeps pages within the budget, and returns
// cursors that the next poll accepts.
func FuzzPoll(f *testing.F) {
	f.Add("", 0, int64(0))
	f.Add("3.25", 10, int64(time.Second))
	f.Add("0.0", -1, int64(-1))
	f.Add("40.600", 1<<40, int64(1<<62))
	f.Add("18446744073709551615.18446744073709551615", 7, int64(0))
	f.Fuzz(func(t *testing.T, cur string, maxBytes int, wait int64) {
		m, err := New(Limits{RingBytes: 512, RingChunks: 16, ChunkBytes: 50, MaxPollBytes: 300, DefaultPollBytes: 100}, newFakeClock())
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		var p *fakeProc
		info, err := startOn(t, m, "a", "sb", func(s backend.Sink) (backend.Process, error) {
			p = newFakeProc(s)
			return p, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 60 {
			p.sink.Write(backend.Stream(1+i%3%2), []byte("0123456789abcdef€"[:1+i%19]))
		}
		p.exit(backend.ExitStatus{}, nil)
		m.mu.Lock()
		done := m.jobs[info.ID].done
		m.mu.Unlock()
		<-done // terminal, so the poll never waits

		r, err := m.Poll(context.Background(), "a", info.ID, cur, maxBytes, time.Duration(wait))
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("Poll(%q): %v", cur, err)
			}
			return
		}
		n := 0
		for i, c := range r.Chunks {
			n += len(c.Data)
			if len(c.Data) == 0 || i > 0 && c.Seq != r.Chunks[i-1].Seq+1 {
				t.Fatalf("chunks not contiguous: %+v", r.Chunks)
			}
		}
		limit := 100
		if maxBytes > 0 {
			limit = min(maxBytes, 300)
		}
		if n > limit {
			t.Fatalf("page of %d bytes, limit %d", n, limit)
		}
		if _, err := m.Poll(context.Background(), "a", info.ID, r.NextCursor, maxBytes, 0); err != nil {
			t.Fatalf("next cursor %q refused: %v", r.NextCursor, err)
		}
	})
}
