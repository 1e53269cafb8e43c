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

package outring

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/playground-dev/playground/hostagent/guestapi"
)

// retained returns the ring's chunks without sealing anything.
func (r *Ring) retained() []Chunk {
	var out []Chunk
	for seq := r.firstSeq; seq < r.NextSeq(); seq++ {
		m := r.meta(seq)
		d := make([]byte, m.n)
		r.copyOut(d, m.Pos)
		out = append(out, Chunk{Stream: m.stream, Seq: seq, Data: d})
	}
	return out
}

func TestRingCoalescesSameStream(t *testing.T) {
	r := New(4<<20, 1024, 64<<10)
	for i := range 10000 {
		r.Write(guestapi.Stdout, []byte{'a' + byte(i%26)})
	}
	if r.count != 1 || r.tail != 10000 {
		t.Fatalf("10000 one-byte writes: %d chunks, %d bytes; want 1 chunk", r.count, r.tail)
	}
	// A write to the other stream starts a new chunk; so does a return.
	r.Write(guestapi.Stderr, []byte("e"))
	r.Write(guestapi.Stdout, []byte("o"))
	if r.count != 3 {
		t.Fatalf("after interleaving: %d chunks, want 3", r.count)
	}
}

func TestRingSplitsAtChunkBytes(t *testing.T) {
	r := New(1<<20, 1024, 64<<10)
	r.Write(guestapi.Stdout, bytes.Repeat([]byte("x"), 200<<10))
	var sizes []int
	for _, c := range r.retained() {
		sizes = append(sizes, len(c.Data))
	}
	want := []int{64 << 10, 64 << 10, 64 << 10, 8 << 10}
	if len(sizes) != len(want) {
		t.Fatalf("chunk sizes %v, want %v", sizes, want)
	}
	for i := range want {
		if sizes[i] != want[i] {
			t.Fatalf("chunk sizes %v, want %v", sizes, want)
		}
	}
}

func TestRingSplitKeepsCharactersWhole(t *testing.T) {
	// "€" is 3 bytes; chunks of 10 bytes cannot hold a whole number of them,
	// so a naive split would cut characters.
	r := New(1<<10, 64, 10)
	text := strings.Repeat("€", 30)
	r.Write(guestapi.Stdout, []byte(text))
	var got []byte
	for _, c := range r.retained() {
		if !utf8.Valid(c.Data) {
			t.Errorf("chunk %d splits a character: %q", c.Seq, c.Data)
		}
		got = append(got, c.Data...)
	}
	if string(got) != text {
		t.Fatalf("data changed")
	}
}

func TestRingEvictsOldestByBytes(t *testing.T) {
	r := New(1024, 1024, 256)
	for i := range 5 {
		r.Write(guestapi.Stream(1+i%2), bytes.Repeat([]byte{byte('a' + i)}, 256))
	}
	if r.count != 4 || r.firstSeq != 1 || r.droppedChunks != 1 || r.droppedBytes != 256 || r.head != 256 {
		t.Fatalf("count %d firstSeq %d dropped %d chunks %d bytes head %d; want 4 1 1 256 256",
			r.count, r.firstSeq, r.droppedChunks, r.droppedBytes, r.head)
	}
	if c := r.retained()[0]; c.Data[0] != 'b' {
		t.Fatalf("oldest kept chunk starts %q, want b", c.Data[0])
	}
}

func TestRingEvictsOldestByCount(t *testing.T) {
	r := New(1<<20, 4, 1024)
	for i := range 10 {
		r.Write(guestapi.Stream(1+i%2), bytes.Repeat([]byte{'x'}, 10))
	}
	if r.count != 4 || r.droppedChunks != 6 || r.droppedBytes != 60 || r.firstSeq != 6 {
		t.Fatalf("count %d dropped %d chunks %d bytes firstSeq %d; want 4, 6, 60, 6",
			r.count, r.droppedChunks, r.droppedBytes, r.firstSeq)
	}
}

func TestRingHugeWriteKeepsTail(t *testing.T) {
	const ringBytes, chunk = 1000, 100
	r := New(ringBytes, 1024, chunk)
	r.Write(guestapi.Stderr, []byte("old"))
	p := make([]byte, 10_123)
	for i := range p {
		p[i] = byte(i)
	}
	r.Write(guestapi.Stdout, p)
	if r.tail != 3+10_123 || r.used() > ringBytes {
		t.Fatalf("tail %d used %d", r.tail, r.used())
	}
	var got []byte
	for _, c := range r.retained() {
		got = append(got, c.Data...)
	}
	if !bytes.Equal(got, p[len(p)-len(got):]) {
		t.Fatal("retained bytes are not the tail of the write")
	}
	if r.droppedBytes+uint64(len(got)) != r.tail {
		t.Fatalf("dropped %d + kept %d != written %d", r.droppedBytes, len(got), r.tail)
	}
	if r.droppedChunks+uint64(r.count) != r.NextSeq() {
		t.Fatalf("dropped %d + kept %d chunks != %d", r.droppedChunks, r.count, r.NextSeq())
	}
}

func TestRingWriteDoesNotAllocate(t *testing.T) {
	r := New(4<<20, 1024, 64<<10)
	small, big := []byte("x"), make([]byte, 100<<10)
	// Warm up: grow the buffers to their bounds.
	for range 200 {
		r.Write(guestapi.Stdout, big)
		r.Write(guestapi.Stderr, small)
	}
	allocs := testing.AllocsPerRun(100, func() {
		r.Write(guestapi.Stdout, big)
		r.Write(guestapi.Stderr, small)
		r.Write(guestapi.Stdout, small)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per write round, want 0", allocs)
	}
}

func TestRingResolve(t *testing.T) {
	r := New(100, 1024, 10)
	// Chunks of 10 bytes at positions 0, 10, ..., 140; 0..49 evicted.
	for i := range 15 {
		r.Write(guestapi.Stream(1+i%2), bytes.Repeat([]byte{'x'}, 10))
	}
	if r.firstSeq != 5 || r.head != 50 || r.NextSeq() != 15 || r.tail != 150 {
		t.Fatalf("setup: firstSeq %d head %d next %d tail %d", r.firstSeq, r.head, r.NextSeq(), r.tail)
	}
	tests := []struct {
		name    string
		in      Cursor
		want    Cursor
		gap     *Gap
		badCurs bool
	}{
		{name: "start", in: Cursor{0, 0}, want: Cursor{5, 50}, gap: &Gap{FromSeq: 0, ToSeq: 5, Chunks: 5, Bytes: 50}},
		{name: "mid evicted chunk", in: Cursor{3, 33}, want: Cursor{5, 50}, gap: &Gap{FromSeq: 3, ToSeq: 5, Chunks: 2, Bytes: 17}},
		{name: "retained chunk start", in: Cursor{7, 70}, want: Cursor{7, 70}},
		{name: "retained mid chunk", in: Cursor{7, 75}, want: Cursor{7, 75}},
		{name: "end of a chunk normalizes", in: Cursor{7, 80}, want: Cursor{8, 80}},
		{name: "end", in: Cursor{15, 150}, want: Cursor{15, 150}},
		{name: "end of last chunk", in: Cursor{14, 150}, want: Cursor{15, 150}},
		{name: "seq past end", in: Cursor{16, 150}, badCurs: true},
		{name: "pos past end", in: Cursor{15, 151}, badCurs: true},
		{name: "pos outside its chunk", in: Cursor{7, 69}, badCurs: true},
		{name: "pos past chunk", in: Cursor{7, 81}, badCurs: true},
		{name: "evicted seq, retained pos", in: Cursor{2, 60}, badCurs: true},
		{name: "huge", in: Cursor{1<<64 - 1, 1<<64 - 1}, badCurs: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, gap, err := r.Resolve(tt.in)
			if tt.badCurs {
				if !errors.Is(err, ErrBadCursor) {
					t.Fatalf("err %v, want ErrBadCursor", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Cursor %+v, want %+v", got, tt.want)
			}
			if (gap == nil) != (tt.gap == nil) || gap != nil && *gap != *tt.gap {
				t.Errorf("gap %+v, want %+v", gap, tt.gap)
			}
		})
	}
}

func TestRingReadSplitsAndSeals(t *testing.T) {
	r := New(1<<20, 1024, 64<<10)
	r.Write(guestapi.Stdout, []byte("hello world"))
	chunks, next := r.Read(Cursor{}, 5)
	if len(chunks) != 1 || string(chunks[0].Data) != "hello" || next != (Cursor{0, 5}) {
		t.Fatalf("first page %+v next %+v", chunks, next)
	}
	// The chunk was handed out: later output goes to a new chunk, and the
	// rest of chunk 0 keeps its address.
	r.Write(guestapi.Stdout, []byte("!"))
	chunks, next = r.Read(next, 100)
	if len(chunks) != 2 || chunks[0].Seq != 0 || chunks[0].Offset != 5 || string(chunks[0].Data) != " world" ||
		chunks[1].Seq != 1 || string(chunks[1].Data) != "!" || next != (Cursor{2, 12}) {
		t.Fatalf("second page %+v next %+v", chunks, next)
	}
}

func TestRingReadDoesNotSplitCharacters(t *testing.T) {
	r := New(1<<20, 1024, 64<<10)
	r.Write(guestapi.Stdout, []byte("ab€cd")) // € at 2..4
	for budget := 3; budget <= 4; budget++ {
		chunks, next := r.Read(Cursor{}, budget)
		if string(chunks[0].Data) != "ab" || next.Pos != 2 {
			t.Errorf("budget %d: page %q, want %q", budget, chunks[0].Data, "ab")
		}
	}
	// A budget smaller than the character still makes progress (as base64).
	chunks, _ := r.Read(Cursor{0, 2}, 1)
	if len(chunks[0].Data) != 1 {
		t.Fatalf("budget 1 mid-character: %q", chunks[0].Data)
	}
}

// TestRingModel checks the ring against a model of the whole output: for
// random writes and reads, the retained bytes are exactly the suffix of the
// output the bounds allow, the counters add up, and a reader that follows
// cursors receives every byte exactly once or is told it was dropped.
func TestRingModel(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 42))
		maxBytes := 64 + rng.IntN(4096)
		maxChunk := 1 + rng.IntN(maxBytes)
		maxChunks := 1 + rng.IntN(64)
		r := New(maxBytes, maxChunks, maxChunk)

		var logData []byte
		var logStream []guestapi.Stream
		var c Cursor
		var received, gapBytes uint64
		for op := range 400 {
			if rng.IntN(3) > 0 {
				n := rng.IntN(maxBytes/2 + 2)
				if rng.IntN(20) == 0 {
					n = rng.IntN(3*maxBytes + 1)
				}
				s := guestapi.Stream(1 + rng.IntN(2))
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				r.Write(s, p)
				logData = append(logData, p...)
				for range p {
					logStream = append(logStream, s)
				}
			} else {
				rc, gap, err := r.Resolve(c)
				if err != nil {
					t.Fatalf("seed %d: resolve(%+v): %v", seed, c, err)
				}
				if gap != nil {
					gapBytes += gap.Bytes
				}
				chunks, next := r.Read(rc, 1+rng.IntN(maxBytes))
				pos := rc.Pos
				for _, ch := range chunks {
					if !bytes.Equal(ch.Data, logData[pos:pos+uint64(len(ch.Data))]) {
						t.Fatalf("seed %d: chunk %d data differs from the output at %d", seed, ch.Seq, pos)
					}
					for i := range ch.Data {
						if logStream[pos+uint64(i)] != ch.Stream {
							t.Fatalf("seed %d: chunk %d mixes streams", seed, ch.Seq)
						}
					}
					pos += uint64(len(ch.Data))
					received += uint64(len(ch.Data))
				}
				if next.Pos != pos {
					t.Fatalf("seed %d: next Cursor %+v after reading to %d", seed, next, pos)
				}
				c = next
				if received+gapBytes != c.Pos {
					t.Fatalf("seed %d: received %d + gaps %d != position %d", seed, received, gapBytes, c.Pos)
				}
			}
			// Invariants.
			if r.tail != uint64(len(logData)) || r.used() > maxBytes || r.count > maxChunks ||
				r.head != r.droppedBytes || r.firstSeq != r.droppedChunks {
				t.Fatalf("seed %d op %d: tail %d/%d used %d/%d count %d/%d head %d dropped %d firstSeq %d droppedChunks %d",
					seed, op, r.tail, len(logData), r.used(), maxBytes, r.count, maxChunks, r.head, r.droppedBytes, r.firstSeq, r.droppedChunks)
			}
			pos := r.head
			for _, ch := range r.retained() {
				if len(ch.Data) == 0 || len(ch.Data) > maxChunk {
					t.Fatalf("seed %d: chunk %d has %d bytes (max %d)", seed, ch.Seq, len(ch.Data), maxChunk)
				}
				if !bytes.Equal(ch.Data, logData[pos:pos+uint64(len(ch.Data))]) {
					t.Fatalf("seed %d: retained chunk %d differs from the output", seed, ch.Seq)
				}
				for i := range ch.Data {
					if logStream[pos+uint64(i)] != ch.Stream {
						t.Fatalf("seed %d: retained chunk %d mixes streams", seed, ch.Seq)
					}
				}
				pos += uint64(len(ch.Data))
			}
			if pos != r.tail {
				t.Fatalf("seed %d: chunks end at %d, tail %d", seed, pos, r.tail)
			}
		}
	}
}
