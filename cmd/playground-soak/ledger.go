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
	"fmt"
	"io"
	"sync"
	"time"
)

// The invariants, as the report and the exit status name them.
const (
	invAnswer    = "every answer right"
	invRetryable = "every failure retryable"
	invServed    = "served again within the bound"
	invBytes     = "job output byte-exact"
	invCancel    = "every cancel proves cleanup"
	invConverge  = "every Tenant and Sandbox converges"
	invBounds    = "the job bounds hold across restarts"
	invStop      = "components stop on SIGTERM and stay up"
	invLeaks     = "nothing leaked on the node"
	invInit      = "no tenant ends its sandbox's supervision"
)

var invariants = []string{invAnswer, invRetryable, invServed, invBytes, invCancel, invConverge, invBounds, invStop, invLeaks, invInit}

// ledger is what the soak counts and what it found, shared by its
// goroutines.
type ledger struct {
	mu      sync.Mutex
	verbose io.Writer
	start   time.Time

	calls     map[string]int // the well-behaved clients' calls, by tool
	ok        int
	retryable map[string]int // their retryable failures, by kind
	// violations by invariant, and the first few of each.
	violations map[string]int
	examples   map[string][]string

	faults  map[string]int
	serve   map[string][]time.Duration // time to serve again, by fault
	deleted []time.Duration            // a tenant's deletion to gone

	bytesChecked   int64
	jobsChecked    int
	cancelsProven  int
	lostJobAnswers int // job_exec answers lost, sent again with their key
	// Of those: answered with their job when sent again, or refused
	// (resource_exhausted: with the key, the job would be the answer, so
	// none had started).
	lostJobsAnswered, lostJobsRefused int
	unknownJobs                       int                        // of those, not answered by the end (the job may run, unknown)
	longestGap                        time.Duration              // the longest a good client went without a success
	longestGapEnd                     time.Duration              // when it ended, from the start
	longestGapWhy                     string                     // its client and the last failure it saw
	stops                             map[string][]time.Duration // SIGTERM to exit, by component
	restarts                          map[string]int             // sandboxes started again after their init exited
	hostile                           map[string]int             // what the hostile tenants did and saw
	notes                             map[string]int             // other things seen, no invariant's
	leaks                             []string
}

func newLedger(verbose io.Writer) *ledger {
	if verbose == nil {
		verbose = io.Discard
	}
	return &ledger{verbose: verbose, start: time.Now(),
		calls: map[string]int{}, retryable: map[string]int{}, violations: map[string]int{}, examples: map[string][]string{},
		faults: map[string]int{}, serve: map[string][]time.Duration{}, hostile: map[string]int{}, stops: map[string][]time.Duration{}, restarts: map[string]int{}, notes: map[string]int{}}
}

// violatef records a violation of invariant inv.
func (l *ledger) violatef(inv, format string, args ...any) {
	msg := fmt.Sprintf("%s: %s", time.Since(l.start).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.violations[inv]++
	if len(l.examples[inv]) < 5 {
		l.examples[inv] = append(l.examples[inv], msg)
	}
	fmt.Fprintf(l.verbose, "  VIOLATION (%s) %s\n", inv, msg)
}

func (l *ledger) logf(format string, args ...any) {
	fmt.Fprintf(l.verbose, "  %s: %s\n", time.Since(l.start).Round(100*time.Millisecond), fmt.Sprintf(format, args...))
}

func (l *ledger) call(tool string) {
	l.mu.Lock()
	l.calls[tool]++
	l.mu.Unlock()
}

// succeeded counts a good client's call that succeeded, gap after its
// previous success; why names the client and the last failure it saw.
func (l *ledger) succeeded(gap time.Duration, why string) {
	l.mu.Lock()
	l.ok++
	if gap > l.longestGap {
		l.longestGap, l.longestGapEnd, l.longestGapWhy = gap, time.Since(l.start), why
	}
	l.mu.Unlock()
}

// stopped records how long a component took to exit on SIGTERM.
func (l *ledger) stopped(name string, d time.Duration) {
	l.mu.Lock()
	l.stops[name] = append(l.stops[name], d)
	l.mu.Unlock()
}

func (l *ledger) retried(kind string) {
	l.mu.Lock()
	l.retryable[kind]++
	l.mu.Unlock()
}

func (l *ledger) count(what string) {
	l.mu.Lock()
	l.hostile[what]++
	l.mu.Unlock()
}

// note counts something seen that is no invariant's.
func (l *ledger) note(what string) {
	l.mu.Lock()
	l.notes[what]++
	l.mu.Unlock()
}

func (l *ledger) fault(kind string) {
	l.mu.Lock()
	l.faults[kind]++
	l.mu.Unlock()
}

func (l *ledger) served(kind string, d time.Duration) {
	l.mu.Lock()
	l.serve[kind] = append(l.serve[kind], d)
	l.mu.Unlock()
}

func (l *ledger) checkedJob(bytes int64) {
	l.mu.Lock()
	l.jobsChecked++
	l.bytesChecked += bytes
	l.mu.Unlock()
}

func (l *ledger) provenCancel() {
	l.mu.Lock()
	l.cancelsProven++
	l.mu.Unlock()
}

// windows are the spans during which a component was down or coming back
// (from its kill until every good tenant was served again, and a grace
// after): a transport error inside one is what a client of a restarting
// component sees, outside one it is a fault of the system.
type windows struct {
	mu    sync.Mutex
	spans []span
}

type span struct{ from, to time.Time }

// grace is how long after a fault's recovery a call's failure is still
// put down to it (a call that began before the recovery).
const grace = 10 * time.Second

// open starts a span now and returns its index.
func (w *windows) open() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans = append(w.spans, span{from: time.Now()})
	return len(w.spans) - 1
}

// close ends span i now (plus the grace).
func (w *windows) close(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans[i].to = time.Now().Add(grace)
}

// covers says whether [from, to] meets a span.
func (w *windows) covers(from, to time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.spans {
		if !s.from.After(to) && (s.to.IsZero() || !s.to.Before(from)) {
			return true
		}
	}
	return false
}

// after returns t, or the end of the last span if later (now while one
// is open).
func (w *windows) after(t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.spans {
		end := s.to
		if end.IsZero() {
			end = time.Now()
		}
		if end.After(t) {
			t = end
		}
	}
	return t
}

// active says whether a span covers now.
func (w *windows) active() bool {
	now := time.Now()
	return w.covers(now, now)
}
