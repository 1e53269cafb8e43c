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
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// Ring keeps the newest output of one job within a byte bound and a chunk
// bound. It is a window on the job's whole output: every byte the job wrote
// has a position (0, 1, ...) in write order across both streams, and every
// chunk a sequence number; the ring holds positions [head, tail) and chunks
// [firstSeq, firstSeq+count), contiguously. Eviction moves head and firstSeq
// forward, so anything before them is known to be dropped and by how much.
//
// A Ring is not safe for concurrent use; its owner serializes calls (the
// job manager under its mutex).
// Its buffers grow by doubling up to the bounds, so a job with little output
// costs little memory, and they are reused, so a steady writer allocates
// nothing per write.
type Ring struct {
	maxBytes  int
	maxChunks int
	maxChunk  int

	buf   []byte      // circular by position: byte p is at buf[p%len(buf)]
	metas []chunkMeta // circular: chunk firstSeq is at metas[first]
	first int
	count int

	firstSeq uint64
	head     uint64
	tail     uint64
	// open is true when the newest chunk may still be extended by a write to
	// its stream. It is cleared when a different stream writes, when the
	// chunk is full, and when a poll hands out any of it (so a delivered
	// chunk never changes).
	open bool

	droppedBytes  uint64
	droppedChunks uint64
}

type chunkMeta struct {
	Pos    uint64
	n      int
	stream guestapi.Stream
}

// Initial buffer sizes; they double up to the bounds.
const (
	minRingBuf   = 4 << 10
	minRingMetas = 16
)

// New is an empty ring of at most maxBytes bytes in maxChunks chunks of at
// most maxChunk bytes each; it allocates nothing until written to.
func New(maxBytes, maxChunks, maxChunk int) Ring {
	return Ring{maxBytes: maxBytes, maxChunks: maxChunks, maxChunk: maxChunk}
}

// NextSeq is the sequence number the next chunk written will have.
func (r *Ring) NextSeq() uint64 { return r.firstSeq + uint64(r.count) }

func (r *Ring) used() int { return int(r.tail - r.head) }

func (r *Ring) meta(seq uint64) *chunkMeta {
	return &r.metas[(r.first+int(seq-r.firstSeq))%len(r.metas)]
}

func (r *Ring) newest() *chunkMeta { return r.meta(r.NextSeq() - 1) }

// Write appends p to stream s, evicting the oldest chunks as needed. It
// copies p and never blocks.
func (r *Ring) Write(s guestapi.Stream, p []byte) {
	if len(p) > r.maxBytes {
		p = r.skip(p)
	}
	for len(p) > 0 {
		if r.open {
			last := r.newest()
			if last.stream == s && last.n < r.maxChunk {
				n := min(len(p), r.maxChunk-last.n)
				if n < len(p) {
					// Fill the chunk up to a character boundary; if the room
					// is within one character, start a new chunk instead.
					if c := runeStart(n, func(i int) byte { return p[i] }); c >= 0 {
						n = c
					}
				}
				// Extend only without evicting: eviction could reach the
				// chunk being extended.
				if n > 0 && r.used()+n <= r.maxBytes {
					r.growBuf(n)
					r.copyIn(p[:n])
					last.n += n
					p = p[n:]
					continue
				}
			}
			r.open = false
		}
		n := min(len(p), r.maxChunk)
		if n < len(p) {
			n = runeCut(n, func(i int) byte { return p[i] })
		}
		// n <= maxChunk <= maxBytes, so this stops at the latest when the
		// ring is empty.
		for r.count > 0 && (r.count >= r.maxChunks || r.used()+n > r.maxBytes) {
			r.evictOldest()
		}
		r.growBuf(n)
		r.growMetas()
		r.metas[(r.first+r.count)%len(r.metas)] = chunkMeta{Pos: r.tail, n: n, stream: s}
		r.count++
		r.copyIn(p[:n])
		r.open = true
		p = p[n:]
	}
}

// skip handles a write larger than the ring: everything now in the ring and
// all but the last maxBytes..maxBytes+maxChunk bytes of p would be evicted by
// the write itself, so they are accounted as dropped without being copied.
// This bounds the time a write holds the lock by the ring size, not the
// write size. The skipped bytes count as whole chunks of maxChunk bytes and
// get sequence numbers, so gaps stay exact.
func (r *Ring) skip(p []byte) []byte {
	for r.count > 0 {
		r.evictOldest()
	}
	k := (len(p) - r.maxBytes) / r.maxChunk
	if k == 0 {
		return p
	}
	b := k * r.maxChunk
	r.firstSeq += uint64(k)
	r.head += uint64(b)
	r.tail += uint64(b)
	r.droppedChunks += uint64(k)
	r.droppedBytes += uint64(b)
	return p[b:]
}

func (r *Ring) evictOldest() {
	m := &r.metas[r.first]
	r.head += uint64(m.n)
	r.droppedBytes += uint64(m.n)
	r.droppedChunks++
	r.first = (r.first + 1) % len(r.metas)
	r.count--
	r.firstSeq++
	if r.count == 0 {
		r.open = false
	}
}

// growBuf makes room for n more bytes (the caller has evicted enough for
// them to fit the bound).
func (r *Ring) growBuf(n int) {
	need := r.used() + n
	if need <= len(r.buf) {
		return
	}
	c := max(2*len(r.buf), minRingBuf, need)
	c = min(c, r.maxBytes)
	nb := make([]byte, c)
	// Re-lay the retained bytes so that position p is at nb[p%c].
	for p := r.head; p < r.tail; {
		i, j := int(p%uint64(len(r.buf))), int(p%uint64(c))
		k := copy(nb[j:], r.buf[i:min(len(r.buf), i+int(r.tail-p))])
		p += uint64(k)
	}
	r.buf = nb
}

// growMetas makes room for one more chunk.
func (r *Ring) growMetas() {
	if r.count < len(r.metas) {
		return
	}
	c := min(max(2*len(r.metas), minRingMetas), r.maxChunks)
	nm := make([]chunkMeta, c)
	for i := range r.count {
		nm[i] = r.metas[(r.first+i)%len(r.metas)]
	}
	r.metas, r.first = nm, 0
}

// copyIn appends p at tail; the buffer has room.
func (r *Ring) copyIn(p []byte) {
	for len(p) > 0 {
		i := int(r.tail % uint64(len(r.buf)))
		k := copy(r.buf[i:], p)
		p = p[k:]
		r.tail += uint64(k)
	}
}

// copyOut fills dst from position pos, which is retained with len(dst) bytes
// after it.
func (r *Ring) copyOut(dst []byte, pos uint64) {
	for len(dst) > 0 {
		i := int(pos % uint64(len(r.buf)))
		k := copy(dst, r.buf[i:])
		dst = dst[k:]
		pos += uint64(k)
	}
}

func (r *Ring) byteAt(pos uint64) byte { return r.buf[pos%uint64(len(r.buf))] }

// Resolve checks a client's cursor against the ring. It returns the cursor
// to read from (normalized to the next chunk when c is at the end of one)
// and, when chunks the client had not finished were evicted, the gap.
func (r *Ring) Resolve(c Cursor) (Cursor, *Gap, error) {
	next := r.NextSeq()
	switch {
	case c.Seq > next:
		return c, nil, &CursorError{Reason: "it is past the end of this job's output"}
	case c.Seq == next:
		if c.Pos != r.tail {
			return c, nil, &CursorError{Reason: "it does not match this job's output"}
		}
		return c, nil, nil
	case c.Seq >= r.firstSeq:
		m := r.meta(c.Seq)
		if c.Pos < m.Pos || c.Pos > m.Pos+uint64(m.n) {
			return c, nil, &CursorError{Reason: "it does not match this job's output"}
		}
		if c.Pos == m.Pos+uint64(m.n) {
			// The client has all of this chunk. If it is the newest, seal it:
			// the client's next cursor must stay valid as output grows.
			if c.Seq == next-1 {
				r.open = false
			}
			c.Seq++
		}
		return c, nil, nil
	default: // c.seq < r.firstSeq: evicted.
		if c.Pos > r.head {
			return c, nil, &CursorError{Reason: "it does not match this job's output"}
		}
		g := &Gap{FromSeq: c.Seq, ToSeq: r.firstSeq, Chunks: r.firstSeq - c.Seq, Bytes: r.head - c.Pos}
		return Cursor{Seq: r.firstSeq, Pos: r.head}, g, nil
	}
}

// Read returns up to budget bytes of chunks from c (a resolved cursor) and
// the cursor after them. It makes one allocation for all the data. When the
// budget ends inside a chunk the chunk is split, preferably at a character
// boundary; the rest comes with the next read at the same seq and a later
// Offset. Any chunk handed out is sealed.
func (r *Ring) Read(c Cursor, budget int) ([]Chunk, Cursor) {
	avail := int(r.tail - c.Pos)
	if avail == 0 || budget <= 0 {
		return nil, c
	}
	data := make([]byte, min(avail, budget))
	var chunks []Chunk
	for c.Seq < r.NextSeq() && len(data) > 0 {
		m := r.meta(c.Seq)
		off := int(c.Pos - m.Pos)
		n := m.n - off
		if n > len(data) {
			// Stop short of a split character; the next page starts with
			// the whole character. runeCut never returns 0, so a page is
			// never empty.
			n = runeCut(len(data), func(i int) byte { return r.byteAt(c.Pos + uint64(i)) })
		}
		r.copyOut(data[:n], c.Pos)
		if chunks == nil {
			chunks = make([]Chunk, 0, min(int(r.NextSeq()-c.Seq), 64))
		}
		chunks = append(chunks, Chunk{Stream: m.stream, Seq: c.Seq, Offset: off, Data: data[:n:n]})
		if c.Seq == r.NextSeq()-1 {
			r.open = false
		}
		data = data[n:]
		c.Pos += uint64(n)
		if off+n == m.n {
			c.Seq++
		} else {
			break
		}
	}
	return chunks, c
}

// Release drops the buffers of a recycled job.
func (r *Ring) Release() {
	r.buf, r.metas = nil, nil
	r.first, r.count = 0, 0
	r.head = r.tail
	r.open = false
}

// Dropped is what eviction has dropped so far: bytes and chunks.
func (r *Ring) Dropped() (bytes, chunks uint64) { return r.droppedBytes, r.droppedChunks }

// AtEnd reports whether c (as Read returned it) is past every byte written
// so far.
func (r *Ring) AtEnd(c Cursor) bool { return c.Seq == r.NextSeq() && c.Pos == r.tail }

// End is the cursor past every byte written so far.
func (r *Ring) End() Cursor { return Cursor{Seq: r.NextSeq(), Pos: r.tail} }
