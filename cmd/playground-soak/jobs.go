//go:build linux

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

package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/playground-dev/playground/mcpgateway/tools"
)

// A sequence job prints batches of seqBatch known lines, one write a
// batch, a quarter of a second apart: some hundreds of chunks in all,
// far under the ring's 1024 chunks and 4 MiB, so that a client away for
// a restart loses nothing, and any loss or repeat shows byte for byte.
const seqBatch = 20

// seqJob is a sequence job that its client polls to its end.
type seqJob struct {
	id, tag string
	batches int
	cursor  string
	stdout  []byte
	stderr  []byte
	// gaps are the evictions the polls reported: where in stdout, and
	// how many bytes.
	gaps     []gapAt
	started  time.Time
	lastPoll time.Time
	// checked: its end was checked; done: its final page acknowledged too
	// (or the job given up), so the client forgets it.
	checked bool
	done    bool
}

type gapAt struct {
	at    int
	bytes uint64
}

func seqCommand(tag string, batches int) string {
	return fmt.Sprintf("i=0; while [ $i -lt %d ]; do seq -f 'L%%06g %s abcdefghijklmnopqrstuvwxyz' $((i*%d)) $((i*%d+%d)); i=$((i+1)); sleep 0.25; done; echo 'end %s' >&2; exit 3",
		batches, tag, seqBatch, seqBatch, seqBatch-1, tag)
}

func seqExpected(tag string, batches int) []byte {
	var b bytes.Buffer
	for k := range batches * seqBatch {
		fmt.Fprintf(&b, "L%06d %s abcdefghijklmnopqrstuvwxyz\n", k, tag)
	}
	return b.Bytes()
}

func (c *goodClient) startSeq(ctx context.Context) {
	c.n++
	// 15 to 60 s of output (5 to 20 s in the short mode, whose clients
	// finish their jobs before it ends).
	batches := 60 + c.rng.Intn(180)
	if c.s.opts.short {
		batches = 20 + c.rng.Intn(60)
	}
	j := &seqJob{tag: fmt.Sprintf("%s-s%d", c.name, c.n), batches: batches, started: time.Now()}
	c.startJob(ctx, &pendingStart{key: j.tag, command: seqCommand(j.tag, j.batches), seq: j})
}

// pendingStart is a job_exec to send, and to send again with the same
// idempotency key while its answer is lost: the job it started, if it
// did, is the answer to the same call with the same key.
type pendingStart struct {
	key, command string
	// lost: an answer was lost (the transport, or unavailable: the
	// agent lost during the call or before it, the gateway says the
	// same either way), so the job may run.
	lost bool
	// next is when to send it again: once a second, as a client that
	// waits for an outage to pass.
	next time.Time
	// The job it starts: a sequence job or a cancel job.
	seq    *seqJob
	cancel *cancelJob
}

// startJob sends p's job_exec, with its key, on the session's handle as
// it is now. Answered, the job is the client's; a refusal
// (resource_exhausted) started nothing, since with the key the answer
// would have been its job; any other failure keeps p to send again at
// the next step, until it is answered.
func (c *goodClient) startJob(ctx context.Context, p *pendingStart) {
	var out tools.JobExecOutput
	_, o := c.try(ctx, "job_exec", map[string]any{"handle": c.handle, "command": p.command, "idempotency_key": p.key}, &out)
	c.pending = nil
	l := c.s.led
	switch {
	case o == served:
		if p.lost {
			l.mu.Lock()
			l.lostJobsAnswered++
			l.mu.Unlock()
		}
		if j := p.seq; j != nil {
			j.id, j.cursor = out.JobID, out.Cursor
			c.seqs = append(c.seqs, j)
		} else {
			j := p.cancel
			j.id, j.cursor = out.JobID, out.Cursor
			c.cancel = j
			c.s.addMarks(j.marks)
		}
		return
	case o == refused, c.lastFailure == "resource_exhausted":
		if p.lost {
			l.mu.Lock()
			l.lostJobsRefused++
			l.mu.Unlock()
		}
		return
	case c.lastFailure == "transport" || c.lastFailure == "unavailable":
		if !p.lost {
			p.lost = true
			l.mu.Lock()
			l.lostJobAnswers++
			l.mu.Unlock()
		}
		p.next = time.Now().Add(time.Second)
	case !p.lost:
		return // refused before it reached the agent (a handle gone): nothing started
	}
	c.pending = p
}

// givenUp counts a start still pending when the client stops: its job's
// fate stays unknown to it.
func (c *goodClient) givenUp() {
	if c.pending != nil && c.pending.lost {
		c.s.led.mu.Lock()
		c.s.led.unknownJobs++
		c.s.led.mu.Unlock()
	}
}

// pollSeq reads the next page of j; at its end it checks the whole output
// and the result, and acknowledges the final page.
func (c *goodClient) pollSeq(ctx context.Context, j *seqJob) {
	// About a second between polls: the job prints four batches a second.
	if time.Since(j.lastPoll) < time.Second {
		return
	}
	j.lastPoll = time.Now()
	var page tools.JobPollOutput
	if j.checked {
		// The acknowledgement that lets the agent recycle the job, until
		// it is answered: a job left unacknowledged holds one of the
		// tenant's retained slots for an hour.
		j.done = c.poll(ctx, j.id, j.cursor, &page) != retry
		return
	}
	switch c.poll(ctx, j.id, j.cursor, &page) {
	case retry:
		return
	case refused:
		j.done = true // lost: given up
		return
	}
	for _, ch := range page.Chunks {
		data, err := decodeStream(ch.Data, ch.Encoding)
		if err != nil {
			c.s.led.violatef(invAnswer, "%s job %s: chunk %d: %v", c.name, j.tag, ch.Seq, err)
			continue
		}
		if ch.Stream == "stderr" {
			j.stderr = append(j.stderr, data...)
		} else {
			j.stdout = append(j.stdout, data...)
		}
	}
	if page.Gap != nil {
		j.gaps = append(j.gaps, gapAt{at: len(j.stdout), bytes: page.Gap.Bytes})
		c.s.led.count("sequence jobs: ring evictions reported (gap)")
	}
	j.cursor = page.NextCursor
	if !page.Done {
		return
	}
	j.checked = true
	c.checkSeq(j, page)
	var ack tools.JobPollOutput
	j.done = c.poll(ctx, j.id, j.cursor, &ack) != retry
}

// checkSeq checks a finished sequence job byte for byte, allowing only the
// bytes its polls reported evicted.
func (c *goodClient) checkSeq(j *seqJob, page tools.JobPollOutput) {
	want := seqExpected(j.tag, j.batches)
	var lost uint64
	// The evicted bytes are cut from what was expected, where each gap
	// was reported (the stderr line comes last: a gap is stdout's).
	for i := len(j.gaps) - 1; i >= 0; i-- {
		g := j.gaps[i]
		end := min(g.at+int(g.bytes), len(want))
		if g.at <= len(want) {
			want = append(want[:g.at:g.at], want[end:]...)
		}
		lost += g.bytes
	}
	wantErr := "end " + j.tag + "\n"
	r := page.Result
	switch {
	case !bytes.Equal(j.stdout, want):
		c.s.led.violatef(invBytes, "%s job %s: stdout %d bytes, want %d (%d evicted): first difference at byte %d",
			c.name, j.tag, len(j.stdout), len(want), lost, firstDiff(j.stdout, want))
	case string(j.stderr) != wantErr:
		c.s.led.violatef(invBytes, "%s job %s: stderr %q, want %q", c.name, j.tag, j.stderr, wantErr)
	case page.State != "exited" || r == nil || r.ExitCode != 3 || r.Killed || r.Error != "":
		c.s.led.violatef(invAnswer, "%s job %s: ended %s, result %+v; want exited with code 3", c.name, j.tag, page.State, r)
	default:
		c.s.led.checkedJob(int64(len(j.stdout) + len(j.stderr)))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// poll polls a job once, without waiting. A job the agent does not know
// is lost: a violation (job IDs survive every restart), and refused.
func (c *goodClient) poll(ctx context.Context, id, cursor string, page *tools.JobPollOutput) outcome {
	_, o := c.try(ctx, "job_poll", map[string]any{"job_id": id, "cursor": cursor, "wait_seconds": 0}, page)
	return o
}

func deleteDone(js []*seqJob) []*seqJob {
	return slices.DeleteFunc(js, func(j *seqJob) bool { return j.done })
}

// cancelJob is a job that starts two detached descendants, one in a
// session of its own (setsid), one double-forked, both ignoring SIGTERM
// like the job itself, then is cancelled: its state must be killed, and
// none of the three may be left on the host. Each sleeps a number of
// seconds no other process uses, its mark on the host.
type cancelJob struct {
	id       string
	marks    []string
	cursor   string
	out      []byte
	phase    cancelPhase
	since    time.Time // the phase's start
	lastSeen int       // how many of its sleeps the last look found
}

type cancelPhase int

const (
	cancelStarting  cancelPhase = iota // until it says ready and its processes are seen
	cancelReady                        // seen on the host: cancel it
	cancelRequested                    // cancelled: poll to its end, then look
	cancelAcking                       // proven: acknowledge its final page
)

// cancelPhaseBound is how long a phase may take with no fault under way.
const cancelPhaseBound = 90 * time.Second

func (c *goodClient) startCancel(ctx context.Context) {
	j := &cancelJob{since: time.Now()}
	for range 3 {
		j.marks = append(j.marks, fmt.Sprintf("9%08d", c.rng.Intn(100_000_000)))
	}
	cmd := fmt.Sprintf(`trap '' TERM; setsid sh -c 'trap "" TERM; sleep %s' >/dev/null 2>&1 & (sh -c 'trap "" TERM; sleep %s' >/dev/null 2>&1 &); echo ready; sleep %s`,
		j.marks[0], j.marks[1], j.marks[2])
	c.n++
	c.startJob(ctx, &pendingStart{key: fmt.Sprintf("%s-c%d", c.name, c.n), command: cmd, cancel: j})
}

// advanceCancel takes the cancel job one step further.
func (c *goodClient) advanceCancel(ctx context.Context) {
	j := c.cancel
	l := c.s.led
	// A phase is late past its bound, counted from its start or from the
	// last fault's recovery, whichever is later.
	late := time.Since(c.s.win.after(j.since)) > cancelPhaseBound
	var page tools.JobPollOutput
	switch j.phase {
	case cancelStarting:
		if o := c.poll(ctx, j.id, j.cursor, &page); o != served {
			if o == refused {
				c.cancel = nil
			}
			return
		}
		j.cursor = page.NextCursor
		for _, ch := range page.Chunks {
			if data, err := decodeStream(ch.Data, ch.Encoding); err == nil {
				j.out = append(j.out, data...)
			}
		}
		if page.State != "running" {
			l.violatef(invAnswer, "%s cancel job %s ended by itself: %s, result %+v", c.name, j.id, page.State, page.Result)
			c.cancel = nil
			return
		}
		if strings.Contains(string(j.out), "ready\n") {
			if j.lastSeen = len(sleeping(j.marks)); j.lastSeen == len(j.marks) {
				j.phase, j.since = cancelReady, time.Now()
				return
			}
		}
		if late {
			l.violatef(invCancel, "%s cancel job %s: its three sleeps are not on the host %s after it started (found %d, output %q)",
				c.name, j.id, cancelPhaseBound, j.lastSeen, j.out)
			c.cancel = nil
		}
	case cancelReady:
		var out tools.JobCancelOutput
		if _, o := c.try(ctx, "job_cancel", map[string]any{"job_id": j.id}, &out); o != served {
			if o == refused {
				c.cancel = nil
			}
			return
		}
		if out.State != "cancelling" && out.State != "killed" {
			l.violatef(invCancel, "%s job_cancel %s: state %s, want cancelling or killed", c.name, j.id, out.State)
		}
		j.phase, j.since = cancelRequested, time.Now()
	case cancelRequested:
		if o := c.poll(ctx, j.id, j.cursor, &page); o != served {
			if o == refused {
				c.cancel = nil
			}
			return
		}
		j.cursor = page.NextCursor
		if !page.Done {
			if late {
				l.violatef(invCancel, "%s cancel job %s: still %s %s after job_cancel", c.name, j.id, page.State, cancelPhaseBound)
				c.cancel = nil
			}
			return
		}
		c.cancel = nil
		if page.State != "killed" || page.Result == nil || !page.Result.Killed {
			l.violatef(invCancel, "%s cancel job %s ended %s, result %+v; want killed", c.name, j.id, page.State, page.Result)
			return
		}
		if left := marked(j.marks); len(left) > 0 {
			l.violatef(invCancel, "%s cancel job %s is killed, but its processes %v are still on the host", c.name, j.id, left)
			return
		}
		l.provenCancel()
		j.phase = cancelAcking
		c.cancel = j
	case cancelAcking:
		if c.poll(ctx, j.id, j.cursor, &page) != retry {
			c.cancel = nil
		}
	}
}
