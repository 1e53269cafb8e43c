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

package hostagent

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/guestexec"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// Execs is the exec and jobs service: synchronous commands (Exec) and
// background jobs (StartJob and the calls on a job), which the job engine
// (jobs.Manager) keeps. It owns exec's latency histogram; the engine has
// its own state, which the sandboxes, calls and limits services reach
// through the engine's methods (parking, ending and admitting a sandbox's
// jobs) and this service's adoptJobs.
type Execs struct {
	sessions handleResolver
	calls    callGate
	freezes  execFreezes
	takeover execTakeover
	jobs     *jobs.Manager
	spans    sandboxSpans
	log      logr.Logger
	// outputLimit is Options.ExecOutputLimit, maxStdin
	// Options.MaxFileBytes, killTimeout Options.KillTimeout.
	outputLimit, maxStdin int
	killTimeout           time.Duration
	// latency is exec's latency by outcome (metrics.go).
	latency *prometheus.HistogramVec
}

// execFreezes is what the exec service asks of the limits service about
// a sandbox frozen for its usage limit.
type execFreezes interface {
	// frozenRefusal is the answer to a call that the freeze of sandbox
	// id caught in progress.
	frozenRefusal(id string) error
	// frozenUnadopted is the answer to a call on a job not found that a
	// sandbox taken over frozen may hold (nil: none).
	frozenUnadopted(tenant string) error
	// killAtThaw and releaseAtThaw end, once the sandbox thaws, a
	// command or a job start its freeze caught.
	killAtThaw(id, tenant string, proc backend.Process)
	releaseAtThaw(id string, release func(context.Context))
	// unadopted says whether the jobs sandboxID holds may not all be
	// taken over yet.
	unadopted(sandboxID string) bool
}

// execTakeover is what the exec service asks of the sandboxes service
// about the sandboxes an agent that just started has still to take over.
type execTakeover interface {
	pendingFor(tenant string) bool
	waitPending(ctx context.Context, tenant, sandboxID string) error
}

// validExec checks a command where it enters the kernel: after it, it is
// trusted. An empty shell is login.
func validExec(req *agentapi.ExecRequest, maxStdin int) error {
	if err := req.Validate(maxStdin); err != nil {
		return err
	}
	if req.Shell == "" {
		req.Shell = agentapi.ShellLogin
	}
	return nil
}

// requestDigest identifies the request a job's idempotency key is given to, in
// sandboxID: every field that makes the job what it is, each with its
// length, so that no two requests share one.
func requestDigest(r agentapi.ExecRequest, sandboxID string) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	tty := ""
	if r.TTY != nil {
		tty = fmt.Sprintf("%dx%d+%d", r.TTY.Rows, r.TTY.Cols, r.TTY.Scrollback)
	}
	for _, s := range []string{sandboxID, r.Command, string(r.Shell), r.Cwd, r.Timeout.String(), strconv.FormatBool(r.Input), tty} {
		field([]byte(s))
	}
	field(r.Stdin)
	return hex.EncodeToString(h.Sum(nil))
}

// Exec runs a command to its end in a fresh /bin/sh of the handle's sandbox.
// On timeout the command and every descendant are killed, with proof, and
// the output produced so far is returned.
func (x *Execs) Exec(ctx context.Context, tenant, handleID string, req agentapi.ExecRequest) (res agentapi.ExecResult, err error) {
	if err := validExec(&req, x.maxStdin); err != nil {
		return agentapi.ExecResult{}, err
	}
	if req.Input || req.TTY != nil {
		return agentapi.ExecResult{}, errorf(agentapi.CodeInvalid, "exec takes its whole input up front and has no terminal: start a job to type into it or to give it a terminal")
	}
	if req.IdempotencyKey != "" {
		return agentapi.ExecResult{}, errorf(agentapi.CodeInvalid, "exec takes no idempotency key (a command that ran is not run again by a key): start a job with job_exec to retry a start safely")
	}
	spec, be, err := x.sessions.resolve(tenant, handleID)
	if err != nil {
		return agentapi.ExecResult{}, err
	}
	if err := x.calls.chargeable(ctx, spec, be); err != nil {
		return agentapi.ExecResult{}, err
	}
	// ctx ends too when the sandbox is frozen for its usage limit.
	ctx, done, err := x.calls.awaken(ctx, spec.ID)
	if err != nil {
		return agentapi.ExecResult{}, err
	}
	defer done()
	ctx, span := x.spans.start(ctx, "sandbox exec", spec.ID, be)
	defer func() {
		if err == nil {
			span.SetAttributes(attribute.Int("process.exit.code", res.ExitCode), attribute.Bool("playground.timed_out", res.TimedOut))
		}
		endSpan(span, err)
	}()
	out := &execOutput{limit: x.outputLimit}
	started := time.Now()
	defer func() { x.observe(ctx, res, err, time.Since(started)) }()
	atLimit := forkLimit(be.Capabilities(), spec.ID)
	proc, err := startExec(ctx, be, spec.ID, req, out)
	err = atLimit(err)
	if err != nil {
		if frozenCause(ctx) {
			return agentapi.ExecResult{}, x.freezes.frozenRefusal(spec.ID)
		}
		return agentapi.ExecResult{}, execError(err)
	}
	waitCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	st, err := proc.Wait(waitCtx)
	if err == nil {
		return out.result(st, false), nil
	}
	if frozenCause(ctx) {
		// Frozen with its sandbox: the call ends now, the command when
		// the sandbox thaws (its kill proven then).
		x.freezes.killAtThaw(spec.ID, tenant, proc)
		return agentapi.ExecResult{}, x.freezes.frozenRefusal(spec.ID)
	}
	timedOut := waitCtx.Err() != nil && ctx.Err() == nil
	// The timeout passed, or the caller went away: end the command's
	// whole tree before answering, so nothing of it outlives the call.
	killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.killTimeout)
	defer cancel()
	if kerr := proc.Kill(killCtx); kerr != nil {
		what := "a timed-out command"
		msg := "the command timed out and its processes could not be proven dead"
		switch {
		case errors.Is(err, backend.ErrProofLost) && st.OOMKilled:
			what, msg = "a command", "the sandbox ran out of memory and the OOM killer took the command's supervision, so its processes could not be proven dead"
		case errors.Is(err, backend.ErrProofLost):
			what, msg = "a command", "the sandbox lost track of the command (its supervising process went away), so its processes could not be proven dead"
		}
		reason := fmt.Sprintf("killing %s of tenant %s in sandbox %s: %v", what, tenant, spec.ID, kerr)
		x.jobs.HaltAdmission(reason, tenant, spec.ID, kerr)
		return agentapi.ExecResult{}, &agentapi.Error{Code: agentapi.CodeUnavailable, Err: kerr,
			Message: msg + ": background jobs are halted in this sandbox until it is restarted (ask the operator: kubectl playground tenant restart)"}
	}
	st, werr := proc.Wait(killCtx)
	if werr != nil {
		st = backend.ExitStatus{ExitCode: -1, Killed: true, Duration: time.Since(started)}
	}
	switch {
	case ctx.Err() != nil:
		return agentapi.ExecResult{}, ctx.Err()
	case !timedOut:
		return agentapi.ExecResult{}, &agentapi.Error{Code: agentapi.CodeInternal, Err: err, Message: "waiting for the command failed, so it was killed: " + err.Error()}
	}
	return out.result(st, true), nil
}

// startExec starts req in sandbox id, its output to sink: the kernel
// speaks the guest protocol itself (guestexec.Exec) to the sandbox's guest
// where its backend gives how to reach it (Capabilities.Guest), and asks
// the backend's Exec where its sandboxes run no guest (jail).
func startExec(ctx context.Context, be backend.Backend, id string, req agentapi.ExecRequest, sink backend.Sink) (backend.Process, error) {
	if g := be.Capabilities().Guest; g != nil {
		return guestexec.Exec(ctx, g, id, req, sink)
	}
	return be.Exec(ctx, id, req, sink)
}

// execError is the answer to a command, or a file call, that its
// sandbox's backend failed or refused.
func execError(err error) error {
	switch {
	case errors.Is(err, backend.ErrInvalidRequest):
		why := strings.TrimPrefix(err.Error(), backend.ErrInvalidRequest.Error()+": ")
		return &agentapi.Error{Code: agentapi.CodeInvalid, Err: err, Message: "the command could not start: " + why}
	case errors.Is(err, backend.ErrExhausted):
		why := strings.TrimPrefix(err.Error(), backend.ErrExhausted.Error()+": ")
		return &agentapi.Error{Code: agentapi.CodeExhausted, Err: err, Message: why}
	case errors.Is(err, backend.ErrNotFound), errors.Is(err, backend.ErrNotRunning):
		return &agentapi.Error{Code: agentapi.CodeUnavailable, Err: err, Message: "the sandbox is not running on this node right now: retry shortly; if it persists, check the Sandbox's conditions"}
	}
	var e *agentapi.Error
	if errors.As(err, &e) {
		return err
	}
	return &agentapi.Error{Code: agentapi.CodeInternal, Err: err, Message: "starting the command failed: " + err.Error()}
}

// execOutput keeps up to limit bytes of each stream and counts the rest.
type execOutput struct {
	limit int

	mu             sync.Mutex
	stdout, stderr []byte
	dropOut        int64
	dropErr        int64
}

func (o *execOutput) Write(s backend.Stream, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	buf, drop := &o.stdout, &o.dropOut
	if s == backend.Stderr {
		buf, drop = &o.stderr, &o.dropErr
	}
	room := o.limit - len(*buf)
	if room < len(p) {
		*drop += int64(len(p) - max(room, 0))
		p = p[:max(room, 0)]
	}
	if need := len(*buf) + len(p); need > cap(*buf) {
		// Double, up to the limit: append grows large slices by a quarter,
		// which for 4 MiB allocated some 20 MiB on the way.
		grown := make([]byte, len(*buf), min(max(2*cap(*buf), need, 64<<10), o.limit))
		copy(grown, *buf)
		*buf = grown
	}
	*buf = append(*buf, p...)
}

func (o *execOutput) result(st backend.ExitStatus, timedOut bool) agentapi.ExecResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	st.TimedOut = timedOut
	return agentapi.ExecResult{
		Stdout:          o.stdout,
		Stderr:          o.stderr,
		ExecOutputSizes: agentapi.ExecOutputSizes{StdoutDropped: o.dropOut, StderrDropped: o.dropErr},
		ExitStatus:      st,
	}
}

// StartJob starts a command in the background on a backend that can prove
// its cleanup.
func (x *Execs) StartJob(ctx context.Context, tenant, handleID string, req agentapi.ExecRequest) (info jobs.JobInfo, err error) {
	if err := validExec(&req, x.maxStdin); err != nil {
		return jobs.JobInfo{}, err
	}
	spec, be, err := x.sessions.resolve(tenant, handleID)
	if err != nil {
		return jobs.JobInfo{}, err
	}
	if err := x.calls.chargeable(ctx, spec, be); err != nil {
		return jobs.JobInfo{}, err
	}
	ctx, done, err := x.calls.awaken(ctx, spec.ID)
	if err != nil {
		return jobs.JobInfo{}, err
	}
	defer done()
	caps := be.Capabilities()
	if !caps.ProvesCleanup {
		return jobs.JobInfo{}, errorf(agentapi.CodeUnavailable, "the %s backend cannot prove that a cancelled job's processes are gone, so it runs no background jobs: use exec", be.Name())
	}
	if caps.JobHolder == nil {
		return jobs.JobInfo{}, errorf(agentapi.CodeUnavailable, "the %s backend's sandboxes cannot hold background jobs: use exec", be.Name())
	}
	if req.IdempotencyKey != "" && x.freezes.unadopted(spec.ID) {
		// The job the key names may be one of those not taken over yet:
		// starting another would run it twice.
		return jobs.JobInfo{}, errorf(agentapi.CodeUnavailable, "this agent has not yet taken over the jobs the sandbox holds, among which the job of this idempotency_key may be: retry shortly")
	}
	ctx, span := x.spans.start(ctx, "sandbox job start", spec.ID, be)
	defer func() {
		span.SetAttributes(attribute.String("playground.job", info.ID))
		endSpan(span, err)
	}()
	return x.startHeldJob(ctx, caps, tenant, spec.ID, req)
}

// startHeldJob starts a job that its sandbox holds: it outlives this
// agent process, and the next one adopts it (adoptJobs). caps are the
// sandbox's backend's, which holds jobs.
func (x *Execs) startHeldJob(ctx context.Context, caps backend.Capabilities, tenant, sandboxID string, req agentapi.ExecRequest) (jobs.JobInfo, error) {
	holder := caps.JobHolder
	attach := attacher(holder, sandboxID)
	start := func(js backend.JobSpec) (jobs.Held, error) {
		// Not the caller's context: a caller that goes away mid-start
		// must not leave a job running that nobody accounts for. The
		// start is bounded by its own time instead, and a start that
		// fails without the holder's refusal is undone below.
		// A freeze of the sandbox for its usage limit ends it too: the
		// start is undone when the sandbox thaws.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), x.killTimeout)
		defer cancel()
		defer context.AfterFunc(ctx, func() {
			if frozenCause(ctx) {
				cancel()
			}
		})()
		atLimit := forkLimit(caps, sandboxID)
		conn, err := holder.JobConn(sctx, sandboxID)
		if err != nil {
			if frozenCause(ctx) {
				return nil, x.freezes.frozenRefusal(sandboxID)
			}
			return nil, execError(atLimit(err))
		}
		j, err := guestexec.StartJob(sctx, conn, req, js)
		err = atLimit(err)
		switch {
		case errors.Is(err, backend.ErrInvalidRequest), errors.Is(err, backend.ErrExhausted):
			return nil, execError(err) // refused: nothing started
		case err != nil && frozenCause(ctx):
			x.freezes.releaseAtThaw(sandboxID, func(ctx context.Context) {
				if err := jobs.Release(ctx, attach, js.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
					x.log.Error(err, "A job whose start a freeze cut short may still run in its sandbox; the next agent adopts it", "job", js.ID)
				}
			})
			return nil, x.freezes.frozenRefusal(sandboxID)
		case err != nil:
			x.releaseUnstarted(attach, js.ID)
			return nil, execError(err)
		}
		return j, nil
	}
	opts := []jobs.StartOption{jobs.WithTimeout(req.Timeout), jobs.WithCommand(req.Command), oomCounter(caps, sandboxID)}
	if req.IdempotencyKey != "" {
		opts = append(opts, jobs.WithKey(req.IdempotencyKey, requestDigest(req, sandboxID)))
	}
	if req.Input {
		opts = append(opts, jobs.WithInput())
	}
	if t := req.TTY; t != nil {
		opts = append(opts, jobs.WithTTY(jobs.TTYSize{Rows: t.Rows, Cols: t.Cols, Scrollback: t.Scrollback}))
	}
	return x.jobs.StartHeld(ctx, tenant, sandboxID, start, attach, opts...)
}

// forkLimit returns, for a start in sandboxID, what makes its failure a
// refusal (backend.ErrExhausted, resource_exhausted to the tenant) when
// the sandbox's process limit refused forks meanwhile: with every PID
// taken, init cannot fork a shepherd to take the command, or one dies as
// it takes it (Go's runtime cannot start a thread), and the start runs
// out of time or loses its connection, which is no internal error.
func forkLimit(caps backend.Capabilities, sandboxID string) func(error) error {
	c := caps.ForkCounter
	if c == nil {
		return func(err error) error { return err }
	}
	before, known := c.ForksRefused(sandboxID)
	return func(err error) error {
		if err == nil || !known || errors.Is(err, backend.ErrInvalidRequest) || errors.Is(err, backend.ErrExhausted) ||
			errors.Is(err, backend.ErrNotRunning) || errors.Is(err, backend.ErrNotFound) {
			return err
		}
		if after, ok := c.ForksRefused(sandboxID); ok && after > before {
			return fmt.Errorf("%w: the sandbox's process limit is reached: no process could start to run the command (%v); end some of its background processes, or ask the operator for a higher spec.resources.pids", backend.ErrExhausted, err)
		}
		return err
	}
}

// oomCounter is the option that lets the job manager tell an OOM kill of
// a held job, on a backend that counts them.
func oomCounter(caps backend.Capabilities, sandboxID string) jobs.StartOption {
	c := caps.OOMCounter
	if c == nil {
		return jobs.WithOOMCounter(nil)
	}
	return jobs.WithOOMCounter(func() (uint64, bool) { return c.OOMKills(sandboxID) })
}

// releaseUnstarted ends job id if its start got as far as the sandbox
// before it failed: the job manager never admitted it, so nothing else
// would bound it.
func (x *Execs) releaseUnstarted(attach jobs.Attacher, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), x.killTimeout)
	defer cancel()
	if err := jobs.Release(ctx, attach, id); err != nil && !errors.Is(err, backend.ErrNotFound) {
		x.log.Error(err, "A job whose start failed may still run in its sandbox; the next agent adopts it", "job", id)
	}
}

// attacher reaches the holder of a job of a sandbox again.
func attacher(holder backend.JobHolder, sandboxID string) jobs.Attacher {
	return func(ctx context.Context, jobID string) (jobs.Held, error) {
		// Init joins the agent to the job's holder itself: no process of
		// the sandbox needs to start for the agent to reach its jobs.
		conn, err := holder.AttachJob(ctx, sandboxID, jobID)
		if err != nil {
			return nil, err
		}
		return guestexec.HeldJob(conn), nil
	}
}

// PollJob returns a page of a job's output; see jobs.Manager.Poll. A job
// of a sandbox an agent that just started is still taking over is waited
// for, a while.
func (x *Execs) PollJob(ctx context.Context, tenant, jobID, cursor string, maxBytes int, wait time.Duration) (jobs.PollResult, error) {
	return retryPending(ctx, x, tenant, jobID, func(ctx context.Context) (jobs.PollResult, error) {
		return x.jobs.Poll(ctx, tenant, jobID, cursor, maxBytes, wait)
	})
}

// JobInput writes to a job's input; see jobs.Manager.Input, and PollJob.
func (x *Execs) JobInput(ctx context.Context, tenant, jobID string, p []byte, end bool) (jobs.JobInfo, error) {
	return retryPending(ctx, x, tenant, jobID, func(ctx context.Context) (jobs.JobInfo, error) { return x.jobs.Input(ctx, tenant, jobID, p, end) })
}

// JobResize resizes a terminal job's terminal; see jobs.Manager.Resize.
func (x *Execs) JobResize(ctx context.Context, tenant, jobID string, size jobs.TTYSize) (jobs.JobInfo, error) {
	return retryPending(ctx, x, tenant, jobID, func(ctx context.Context) (jobs.JobInfo, error) { return x.jobs.Resize(ctx, tenant, jobID, size) })
}

// JobScreen reads a terminal job's screen; see jobs.Manager.Screen.
func (x *Execs) JobScreen(ctx context.Context, tenant, jobID string, scrollback int) (jobs.Screen, jobs.JobInfo, error) {
	var scr jobs.Screen
	info, err := retryPending(ctx, x, tenant, jobID, func(ctx context.Context) (jobs.JobInfo, error) {
		var (
			info jobs.JobInfo
			err  error
		)
		scr, info, err = x.jobs.Screen(ctx, tenant, jobID, scrollback)
		return info, err
	})
	return scr, info, err
}

// awakenJob is awaken for the sandbox that holds the tenant's job jobID;
// a job the agent does not know is left to the caller.
func (x *Execs) awakenJob(ctx context.Context, tenant, jobID string) (_ context.Context, done func(), err error) {
	id, ok := x.jobs.SandboxOf(tenant, jobID)
	if !ok {
		return ctx, func() {}, nil
	}
	return x.calls.awaken(ctx, id)
}

// retryPending runs call on a job once its sandbox is awake, and once
// more if the job was not found but may be one that a sandbox still to be
// taken over holds: every call on a job goes through it. A job of a
// sandbox frozen for its usage limit is kept, and the call refused at
// once (as one in progress when the freeze came).
func retryPending[T any](ctx context.Context, x *Execs, tenant, jobID string, call func(context.Context) (T, error)) (T, error) {
	var zero T
	cctx, done, err := x.awakenJob(ctx, tenant, jobID)
	if err != nil {
		return zero, err
	}
	defer done()
	res, err := call(cctx)
	if err != nil && frozenCause(cctx) {
		if id, ok := x.jobs.SandboxOf(tenant, jobID); ok {
			return zero, x.freezes.frozenRefusal(id)
		}
	}
	if x.mayBePending(tenant, err) {
		if perr := x.takeover.waitPending(ctx, tenant, ""); perr != nil {
			return res, perr
		}
		res, err = call(ctx)
	}
	if errors.Is(err, jobs.ErrNotFound) {
		// Perhaps one that a sandbox taken over frozen holds.
		if ferr := x.freezes.frozenUnadopted(tenant); ferr != nil {
			return zero, ferr
		}
	}
	return res, err
}

// CancelJob cancels a job; see jobs.Manager.Cancel, and PollJob. A job of
// a sandbox frozen for its usage limit is not cancelled: the call is
// refused, the job kept, as every call that reaches the frozen sandbox.
func (x *Execs) CancelJob(ctx context.Context, tenant, jobID string) (jobs.JobInfo, error) {
	return retryPending(ctx, x, tenant, jobID, func(ctx context.Context) (jobs.JobInfo, error) { return x.jobs.Cancel(ctx, tenant, jobID) })
}

// ExecOutputLimit is how many bytes of each stream a synchronous command
// keeps: what its result may hold is twice this.
func (x *Execs) ExecOutputLimit() int { return x.outputLimit }

// mayBePending says whether a job not found may be one that a sandbox of
// the tenant, still to be taken over, holds.
func (x *Execs) mayBePending(tenant string, err error) bool {
	return errors.Is(err, jobs.ErrNotFound) && x.takeover.pendingFor(tenant)
}

// adoptJobs takes over the jobs that a sandbox holds, started by an
// earlier agent process, under their IDs: their tenant polls and cancels
// them as before. A job the manager refuses (not the sandbox's tenant's,
// or past its bounds) is released, killed with proof: nothing else would
// bound it. An error leaves the rest for the next Ensure to adopt.
func (x *Execs) adoptJobs(ctx context.Context, be backend.Backend, spec backend.Spec) error {
	holder := be.Capabilities().JobHolder
	if holder == nil {
		return nil
	}
	recs, err := holder.ListJobs(ctx, spec.ID)
	if err != nil {
		return fmt.Errorf("listing the jobs of sandbox %s: %w", spec.ID, err)
	}
	attach := attacher(holder, spec.ID)
	var errs []error
	for _, rec := range recs {
		info, err := x.jobs.Adopt(ctx, spec.Tenant, spec.ID, rec, attach, oomCounter(be.Capabilities(), spec.ID))
		if err == nil {
			x.log.Info("Adopted a job the sandbox holds", "sandbox", spec.ID, "job", info.ID, "state", info.State)
			continue
		}
		if errors.Is(err, jobs.ErrClosed) || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, jobs.ErrUnreachable) {
			errs = append(errs, err) // the next Ensure tries again
			continue
		}
		x.log.Error(err, "Releasing a job the sandbox holds that this agent cannot adopt", "sandbox", spec.ID, "job", rec.Spec.ID)
		if aerr := jobs.Release(ctx, attach, rec.Spec.ID); aerr != nil && !errors.Is(aerr, backend.ErrNotFound) {
			errs = append(errs, fmt.Errorf("releasing job %s of sandbox %s: %w", rec.Spec.ID, spec.ID, aerr))
		}
	}
	return errors.Join(errs...)
}
