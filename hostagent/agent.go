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
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// Defaults of Options.
const (
	DefaultHandleTTL           = 15 * time.Minute
	DefaultMaxHandlesPerTenant = 64
	DefaultMaxHandles          = 4096
	DefaultExecOutputLimit     = 4 << 20
	DefaultMaxFileBytes        = bounds.MaxFileBytes
	DefaultKillTimeout         = 30 * time.Second
	// DefaultFileTimeout bounds a file operation: a whole read or write
	// of up to MaxFileBytes takes milliseconds, a digest about a second
	// per GiB, so five minutes digests some 300 GiB.
	DefaultFileTimeout = 5 * time.Minute
	// DefaultAdoptTimeout bounds how long the first Ensure of a sandbox
	// waits for it to list and hand over the jobs it holds: a sandbox
	// whose processes hold everything it has does not hold the agent.
	DefaultAdoptTimeout = 15 * time.Second
	// DefaultSigningKeyWait bounds how long a call waits for the signing
	// key of a sandbox that serves before its key is in (ExpectSigningKey):
	// a warm claim's key follows it within milliseconds.
	DefaultSigningKeyWait = 10 * time.Second
	// DefaultUsageLimitOvershoot is the CPU time, in seconds, a sandbox
	// may use past a spent CPU limit before the agent freezes it, besides
	// the freeze's own latency (limits.go).
	DefaultUsageLimitOvershoot = 1.0
)

// Options configure an Agent. Zero fields take the defaults above.
type Options struct {
	// UsageFile keeps the book of what sandboxes spent across restarts
	// of the agent (usage.go); empty: in memory only.
	UsageFile string
	// UsageLimitOvershoot bounds, in CPU-seconds, what a sandbox uses past
	// a spent CPU limit before the limiter freezes it, besides the
	// freeze's latency: the limiter checks it sooner as its budget
	// shrinks (limits.go). DefaultUsageLimitOvershoot when zero; at least
	// MinUsageLimitOvershoot.
	UsageLimitOvershoot float64
	// Tracer makes the spans of the calls' time in sandboxes (nil: none).
	Tracer trace.TracerProvider
	// Backends run the sandboxes, one per backend class (their names must
	// differ); a sandbox's Spec.Backend picks one, and an empty one means
	// the first. At least one is required.
	Backends []backend.Backend
	// JobLimits bound the job manager (jobs.DefaultLimits when zero).
	JobLimits jobs.Limits
	// Clock drives handle expiry and the job manager; nil is the real clock.
	Clock jobs.Clock
	// HandleTTL is how long an unused session handle lives; every use renews it.
	HandleTTL time.Duration
	// MaxHandlesPerTenant and MaxHandles bound the open handles.
	MaxHandlesPerTenant int
	MaxHandles          int
	// ExecOutputLimit bounds what a synchronous command keeps per stream;
	// beyond it the output is counted as dropped (job_exec keeps more).
	ExecOutputLimit int
	// MaxFileBytes bounds read and write payloads.
	MaxFileBytes int
	// KillTimeout bounds the kill of a timed-out command.
	KillTimeout time.Duration
	// FileTimeout bounds each file operation (read, write, their ranged
	// forms, digest) in the sandbox: past it the operation's processes
	// are killed and the call fails, saying so.
	FileTimeout time.Duration
	// AdoptTimeout bounds the adoption of a sandbox's held jobs by the
	// first Ensure of this agent process.
	AdoptTimeout time.Duration
	// SigningKeyWait bounds how long a session's opening (and a worker's
	// start) waits for the signing key of a sandbox whose key is expected
	// and not in yet (ExpectSigningKey): past it the call is refused as
	// unavailable, to be retried.
	SigningKeyWait time.Duration
	// WakeNotice is how long a wake from an idle suspension runs before
	// the sandbox's state says Waking (DefaultWakeNotice when zero): most
	// take less, and go from asleep to Running in one change.
	WakeNotice time.Duration
	// Logger receives the detail of internal failures that tenants see
	// only as an error ID; the zero Logger drops it.
	Logger logr.Logger
	// ImageCredentials is the pull-credential service the Agent offers
	// (ImageCredentials); nil: a new one. A test that runs the node agent
	// passes its own to see what the manager delivered.
	ImageCredentials *ImageCredentials
}

// Agent is the execution kernel of one node. It is safe for concurrent use.
type Agent struct {
	backends []backend.Backend // in the order given; the first is the default
	jobs     *jobs.Manager
	clock    jobs.Clock
	opts     Options
	// keys is the signing-key service (signingkey.go).
	keys *SigningKeys
	// images is the pull-credential service (imagecredentials.go).
	images *ImageCredentials
	// snaps is the snapshot service (snapshot.go).
	snaps *Snapshots
	// workers is the worker service (workers.go).
	workers *Workers
	// files is the file service (files.go).
	files *Files
	// pools is the warm-pool service (pool.go).
	pools *Pools
	// sessions is the sessions service (sessions.go).
	sessions *Sessions
	// execs is the exec and jobs service (exec.go).
	execs *Execs
	// idle is the idle service (idle.go).
	idle *Idleness
	// limits is the usage limiter (limits.go).
	limits *Limiter
	// spans makes the spans of the calls' time in sandboxes.
	spans sandboxSpans
	// stateChanges carries the IDs of sandboxes whose runtime state
	// changed (runtime.go).
	stateChanges chan string

	mu        sync.Mutex
	sandboxes map[string]*sandbox // by sandbox ID
	// usage is the usage service, the book of what sandboxes spent
	// (usage.go).
	usage *UsageBook
	// pending are the sandboxes an agent that just started has still to
	// take over (Pending), by ID: calls for them are answered as
	// unavailable, with why, rather than as for a sandbox not here.
	pending map[string]pendingSandbox
	// calls keeps the calls in progress in each sandbox (calls.go).
	calls *callTracker
}

// pendingSandbox is a sandbox Ensure has not taken over yet.
type pendingSandbox struct {
	tenant string
	// failed says why the last attempt failed; empty while none has.
	failed string
	// settled is closed once an attempt succeeded or failed.
	settled chan struct{}
}

// pendingWait is how long a call for a sandbox still to be taken over
// waits for it before it is answered as unavailable: a restart's usual
// take-over is shorter, a sandbox that holds it up holds its own calls
// no longer.
const pendingWait = 10 * time.Second

type sandbox struct {
	spec backend.Spec
	// be is the backend that runs it, the one its Spec.Backend names.
	be backend.Backend
	// suspended: stopped by Suspend; Ensure starts it again.
	suspended bool
	// restartUnreported: an Ensure found it dead, or started it again, and
	// then failed; the next Ensure that succeeds reports the restart.
	restartUnreported bool
	// transit is held by whatever changes how its processes are (an
	// Ensure, a restart, a suspension; a sleep and a wake, idle.go; a
	// freeze and a thaw, limits.go) while it runs. Its idleness and its
	// freeze are the idle service's and the limiter's, its calls in
	// progress the call tracker's (calls.go).
	transit sync.Mutex

	// Runtime state (runtime.go): the state last noted and since when;
	// keptMemory, suspended with its memory.
	state      RuntimeState
	stateSince time.Time
	keptMemory bool
}

// New returns an agent on opts.Backends.
func New(opts Options) (*Agent, error) {
	if len(opts.Backends) == 0 {
		return nil, errors.New("hostagent: a backend is required")
	}
	seen := map[string]bool{}
	for _, be := range opts.Backends {
		if be == nil || be.Name() == "" || seen[be.Name()] {
			return nil, errors.New("hostagent: each backend must be set and have a name of its own")
		}
		seen[be.Name()] = true
	}
	if opts.Clock == nil {
		opts.Clock = jobs.RealClock{}
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	setDefault(&opts.HandleTTL, DefaultHandleTTL)
	setDefault(&opts.MaxHandlesPerTenant, DefaultMaxHandlesPerTenant)
	setDefault(&opts.MaxHandles, DefaultMaxHandles)
	setDefault(&opts.ExecOutputLimit, DefaultExecOutputLimit)
	setDefault(&opts.MaxFileBytes, DefaultMaxFileBytes)
	setDefault(&opts.KillTimeout, DefaultKillTimeout)
	setDefault(&opts.FileTimeout, DefaultFileTimeout)
	setDefault(&opts.AdoptTimeout, DefaultAdoptTimeout)
	setDefault(&opts.SigningKeyWait, DefaultSigningKeyWait)
	setDefault(&opts.WakeNotice, DefaultWakeNotice)
	setDefault(&opts.UsageLimitOvershoot, DefaultUsageLimitOvershoot)
	if opts.UsageLimitOvershoot < MinUsageLimitOvershoot {
		return nil, fmt.Errorf("hostagent: the usage limit overshoot (--usage-limit-overshoot) is %g CPU-seconds: give at least %g, or 0 for the default %g", opts.UsageLimitOvershoot, MinUsageLimitOvershoot, DefaultUsageLimitOvershoot)
	}
	book, err := newUsageBook(opts.UsageFile)
	if err != nil {
		return nil, err
	}
	jm, err := jobs.New(opts.JobLimits, opts.Clock, jobs.WithLogger(opts.Logger), jobs.WithOnEnd(func(e jobs.Ended) { book.chargeJob(e, opts.Clock.Now()) }))
	if err != nil {
		return nil, err
	}
	book.keepCharged = jm.Limits().RetainedPerTenant
	a := &Agent{
		usage:        book,
		backends:     opts.Backends,
		jobs:         jm,
		clock:        opts.Clock,
		opts:         opts,
		stateChanges: make(chan string, stateChangesBuffer),
		spans:        sandboxSpans{tp: opts.Tracer},
		calls:        newCallTracker(opts.Clock),
		sandboxes:    map[string]*sandbox{},
		pending:      map[string]pendingSandbox{},
	}
	a.limits = newLimiter(a, book, a.calls, jm, opts)
	a.idle = newIdleness(a, a.calls, jm, opts)
	a.idle.limits, a.limits.idle = a.limits, a.idle
	book.clock, book.log, book.sandboxes, book.jobs, book.limiter = opts.Clock, opts.Logger, a, jm, a.limits
	gate := callGates{awakener: a.idle, Limiter: a.limits}
	a.keys = newSigningKeys(a, opts.SigningKeyWait)
	a.images = opts.ImageCredentials
	if a.images == nil {
		a.images = NewImageCredentials()
	}
	a.snaps = newSnapshots(a, gate, opts.Logger)
	a.limits.snaps = a.snaps
	a.workers = &Workers{sandboxes: a, keys: a.keys, calls: gate}
	a.pools = newPools(a)
	a.sessions = newSessions(a, a.keys, a.idle, jm, opts)
	a.execs = &Execs{sessions: a.sessions, calls: gate, freezes: a.limits, takeover: a, jobs: jm, spans: a.spans, log: opts.Logger,
		outputLimit: opts.ExecOutputLimit, maxStdin: opts.MaxFileBytes, killTimeout: opts.KillTimeout, latency: newExecDuration()}
	a.limits.adopter = a.execs
	a.files = &Files{sessions: a.sessions, calls: gate, spans: a.spans, maxBytes: opts.MaxFileBytes, timeout: opts.FileTimeout}
	return a, nil
}

// callGates is the gate the services that reach a sandbox pass a call
// through (callGate, fileCalls, snapshotCalls): the limiter admits it
// (chargeable, and its refusals), the idle service wakes the sandbox and
// counts the call in progress (awaken).
type callGates struct {
	awakener
	*Limiter
}

// SigningKeys is the agent's signing-key service.
func (a *Agent) SigningKeys() *SigningKeys { return a.keys }

// ImageCredentials is the agent's pull-credential service.
func (a *Agent) ImageCredentials() *ImageCredentials { return a.images }

// Snapshots is the agent's snapshot service.
func (a *Agent) Snapshots() *Snapshots { return a.snaps }

// Workers is the agent's worker service.
func (a *Agent) Workers() *Workers { return a.workers }

// Files is the agent's file service.
func (a *Agent) Files() *Files { return a.files }

// Pools is the agent's warm-pool service.
func (a *Agent) Pools() *Pools { return a.pools }

// Sessions is the agent's sessions service.
func (a *Agent) Sessions() *Sessions { return a.sessions }

// Execs is the agent's exec and jobs service.
func (a *Agent) Execs() *Execs { return a.execs }

// Usage is the agent's usage service.
func (a *Agent) Usage() *UsageBook { return a.usage }

// Idleness is the agent's idle service.
func (a *Agent) Idleness() *Idleness { return a.idle }

// Limiter is the agent's usage limiter.
func (a *Agent) Limiter() *Limiter { return a.limits }

// tenants are the sandboxes of tenants (not a builder's or the pool's)
// this agent serves, by ID.
func (a *Agent) tenants() map[string]sandboxView {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]sandboxView{}
	for id, s := range a.sandboxes {
		if s.spec.Tenant != "" {
			out[id] = sandboxView{spec: s.spec, be: s.be, suspended: s.suspended}
		}
	}
	return out
}

// parkBriefly parks sandbox id's held jobs for a moment (a checkpoint):
// see jobs.Manager.ParkSandboxBriefly.
func (a *Agent) parkBriefly(id string) (unpark func()) { return a.jobs.ParkSandboxBriefly(id) }

// pendingFor says whether the tenant has a sandbox still to be taken
// over by an agent that just started (Pending).
func (a *Agent) pendingFor(tenant string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pending {
		if p.tenant == tenant {
			return true
		}
	}
	return false
}

// callGate is what a service that runs something in a sandbox, or reaches
// it, asks before it does: the limiter whether its usage limit lets it
// (chargeable), the idle service to wake it and count the call in
// progress (awaken, whose context a freeze for the limit ends).
type callGate interface {
	awakener
	chargeable(ctx context.Context, spec backend.Spec, be backend.Backend) error
}

// awakener is the idle service's: awaken counts a call to sandbox id in
// progress, waking it first if it sleeps, until done.
type awakener interface {
	awaken(ctx context.Context, id string) (_ context.Context, done func(), err error)
}

// sandboxView is what the sandboxes service tells the other services of
// a sandbox it serves.
type sandboxView struct {
	spec backend.Spec
	be   backend.Backend
	// suspended: stopped by Suspend until the next Ensure.
	suspended bool
}

// served is a sandbox this agent serves.
func (a *Agent) served(id string) (sandboxView, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sandboxes[id]
	if !ok {
		return sandboxView{}, false
	}
	return sandboxView{spec: s.spec, be: s.be, suspended: s.suspended}, true
}

// servedIDs are the IDs of the sandboxes this agent serves.
func (a *Agent) servedIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.sandboxes))
	for id := range a.sandboxes {
		ids = append(ids, id)
	}
	return ids
}

// hold takes sandbox id's transit lock, which serialises whatever changes
// how its processes are (a sleep, a wake, a freeze, a thaw, an Ensure, a
// restart, a suspension), until release; false when it is not served
// (then, or once the lock is taken).
func (a *Agent) hold(id string) (_ sandboxView, release func(), ok bool) {
	a.mu.Lock()
	s, ok := a.sandboxes[id]
	a.mu.Unlock()
	if !ok {
		return sandboxView{}, nil, false
	}
	s.transit.Lock()
	return a.heldView(id, s)
}

// tryHold is hold if the lock is free; release is nil when it is not.
func (a *Agent) tryHold(id string) (_ sandboxView, release func(), ok bool) {
	a.mu.Lock()
	s, ok := a.sandboxes[id]
	a.mu.Unlock()
	if !ok {
		return sandboxView{}, nil, false
	}
	if !s.transit.TryLock() {
		return sandboxView{}, nil, true
	}
	return a.heldView(id, s)
}

// heldView is the view of s, whose transit lock the caller took, and the
// lock's release; false, the lock released, if s was removed meanwhile.
func (a *Agent) heldView(id string, s *sandbox) (sandboxView, func(), bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sandboxes[id] != s {
		s.transit.Unlock()
		return sandboxView{}, nil, false
	}
	return sandboxView{spec: s.spec, be: s.be, suspended: s.suspended}, s.transit.Unlock, true
}

// resume starts again (or restores) sandbox spec, asleep for idleness,
// whose transit lock the caller holds: a wake.
func (a *Agent) resume(ctx context.Context, spec backend.Spec) error {
	_, err := a.ensure(ctx, spec, true)
	return err
}

// pendingTakeover says whether sandbox id is still to be taken over by an
// agent that just started (Pending).
func (a *Agent) pendingTakeover(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.pending[id]
	return ok
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Backends are the agent's backends, the default first.
func (a *Agent) Backends() []backend.Backend { return a.backends }

// Backend returns the backend of a class; "" is the default.
func (a *Agent) Backend(class string) (backend.Backend, bool) {
	if class == "" {
		return a.backends[0], true
	}
	for _, be := range a.backends {
		if be.Name() == class {
			return be, true
		}
	}
	return nil, false
}

// backendFor is the backend of spec, or an error that says which this
// node offers.
func (a *Agent) backendFor(spec backend.Spec) (backend.Backend, error) {
	if be, ok := a.Backend(spec.Backend); ok {
		if !be.Capabilities().SharedPile && slices.ContainsFunc(spec.Faculties, func(f backend.Faculty) bool { return f.SharedPile }) {
			return nil, errorf(agentapi.CodeInvalid, "the %s backend mounts no shared pile: a Tenant that lists one (spec.pile.shared) runs on the oci backend", be.Name())
		}
		return be, nil
	}
	names := make([]string, len(a.backends))
	for i, be := range a.backends {
		names[i] = be.Name()
	}
	return nil, errorf(agentapi.CodeInvalid, "this node offers the backends %s, not %s", strings.Join(names, ", "), spec.Backend)
}

// SetEgressCredentials hands a sandbox's brokered credentials to the
// backends that broker them. A sandbox the agent serves must be tenant's
// (the manager names it as its Sandbox does); one it does not serve yet
// takes them when it starts.
func (a *Agent) SetEgressCredentials(tenant, sandboxID string, creds []backend.EgressCredential) error {
	if err := backend.ValidateID(sandboxID); err != nil {
		return errorf(agentapi.CodeInvalid, "%v", err)
	}
	var serving backend.Backend // nil: any may serve it
	a.mu.Lock()
	if s, ok := a.sandboxes[sandboxID]; ok {
		if s.spec.Tenant != tenant {
			a.mu.Unlock()
			return errorf(agentapi.CodeNotFound, "no such sandbox for tenant %s on this node", tenant)
		}
		serving = s.be
	}
	a.mu.Unlock()
	var brokers int
	for _, be := range a.backends {
		if br := be.Capabilities().EgressBroker; br != nil && (serving == nil || serving == be) {
			brokers++
			if err := br.SetEgressCredentials(sandboxID, creds); err != nil {
				return errorf(agentapi.CodeInvalid, "%v", err)
			}
		}
	}
	if brokers == 0 && len(creds) > 0 {
		return errorf(agentapi.CodeInvalid, "no backend of this node brokers egress credentials")
	}
	return nil
}

// Jobs is the agent's job manager, for status and metrics.
func (a *Agent) Jobs() *jobs.Manager { return a.jobs }

// Close stops the job manager. Jobs run on in their sandboxes, which hold
// them, for the next agent to adopt. Sandboxes and their files stay; they
// are reattached by the next agent.
func (a *Agent) Close(ctx context.Context) error { return a.jobs.Close(ctx) }

// Ensure makes the sandbox of spec ready on this node and serves it:
// reattached if the backend still has it (files and processes untouched),
// provisioned otherwise, and started.
func (a *Agent) Ensure(ctx context.Context, spec backend.Spec) error {
	_, err := a.EnsureRestarted(ctx, spec)
	return err
}

// EnsureRestarted is Ensure, and also says whether the sandbox had stopped
// while this agent served it (its init died, and every process with it)
// and was started again over its files.
func (a *Agent) EnsureRestarted(ctx context.Context, spec backend.Spec) (restarted bool, err error) {
	return a.ensure(ctx, spec, false)
}

// ensure is EnsureRestarted; held says that the caller holds the
// sandbox's transit lock: a wake of a sandbox that sleeps for idleness
// (idle.go), which it otherwise leaves asleep, its spec kept for the wake,
// or a restart. Otherwise ensure takes that lock for a sandbox it serves,
// so that no freeze for its usage limit (limits.go), sleep or suspension
// runs meanwhile.
func (a *Agent) ensure(ctx context.Context, spec backend.Spec, held bool) (restarted bool, err error) {
	if spec.ID == "" || spec.Tenant == "" {
		return false, errorf(agentapi.CodeInvalid, "a sandbox needs an ID and a tenant")
	}
	be, err := a.backendFor(spec)
	if err != nil {
		return false, err
	}
	// A sandbox this agent served whose init is gone lost every process
	// with it (an OOM kill, a kill from the host, a Stop): its jobs are
	// over, whatever their connections said as they broke, and starting
	// it again is as clean as a restart.
	const why = "the sandbox stopped (its init exited: out of memory, killed, or stopped), and every process in it with it; the job's output so far is kept"
	a.mu.Lock()
	s, served := a.sandboxes[spec.ID]
	if served && s.be != be {
		a.mu.Unlock()
		return false, errorf(agentapi.CodeInvalid, "sandbox %s runs on the %s backend, not %s: a sandbox keeps its backend", spec.ID, s.be.Name(), be.Name())
	}
	asleep := func() bool {
		if served && a.idle.Asleep(spec.ID) && !held {
			// Asleep on purpose: the next call wakes it, with this spec.
			s.spec = spec
			return true
		}
		return false
	}
	if asleep() {
		a.mu.Unlock()
		return false, nil
	}
	if served && !held {
		a.mu.Unlock()
		s.transit.Lock()
		defer s.transit.Unlock()
		a.mu.Lock()
		if asleep() { // put to sleep meanwhile
			a.mu.Unlock()
			return false, nil
		}
	}
	// Suspended or asleep, its processes are stopped or saved on purpose.
	dead := served && !s.suspended && !a.idle.Asleep(spec.ID) && !a.snaps.taking(spec.ID) && !aliveOn(s.be, spec.ID)
	if served && a.limits.frozen(spec.ID) && !dead {
		// Frozen for its usage limit: it stays so; the limiter thaws it.
		s.spec = spec
		a.mu.Unlock()
		return false, nil
	}
	unadopted := served && a.limits.unadopted(spec.ID)
	blank := a.pools.takeBlank(spec.ID)
	// Frozen for its usage limit when the last agent process stopped: a
	// restart of the agent does not thaw it (limits.go).
	keepFrozen := !served && be.Capabilities().Pauser != nil && a.usage.frozen(spec.ID)
	a.mu.Unlock()
	if dead {
		a.jobs.EndSandbox(spec.ID, why, false)
	}
	starts, counted := startsOf(be, spec.ID)
	startedAgain := func() bool {
		now, _ := startsOf(be, spec.ID)
		return served && counted && now != starts
	}
	defer func() {
		// A restart whose start then failed is still a restart: the next
		// Ensure that succeeds says so.
		if err != nil && (dead || startedAgain()) {
			a.mu.Lock()
			if s, ok := a.sandboxes[spec.ID]; ok {
				s.restartUnreported = true
			}
			a.mu.Unlock()
		}
	}()
	var key *signingKeyHeld // installed before this start
	rspec := spec
	rspec.Paused = keepFrozen
	err = be.Reattach(ctx, rspec)
	switch {
	case errors.Is(err, backend.ErrNotFound):
		if err := be.Provision(ctx, spec); err != nil {
			return false, fmt.Errorf("provisioning sandbox %s: %w", spec.ID, err)
		}
	case errors.Is(err, backend.ErrNotRunning):
		a.jobs.EndSandbox(spec.ID, why, false)
		dead = true
	case err != nil:
		return false, fmt.Errorf("reattaching sandbox %s: %w", spec.ID, err)
	}
	if err != nil {
		// Provisioned, or found not running: started, its key in first.
		if key, err = a.keys.installStartKey(ctx, be, spec.ID); err != nil {
			return false, err
		}
		if err := be.Start(ctx, spec.ID); err != nil {
			return false, fmt.Errorf("starting sandbox %s: %w", spec.ID, err)
		}
	}
	// The init died after the check above, and Reattach started it again;
	// or an earlier Ensure restarted it and failed: the same as found dead.
	late := startedAgain()
	a.mu.Lock()
	if s, ok := a.sandboxes[spec.ID]; ok && s.restartUnreported {
		late, s.restartUnreported = true, false
	}
	a.mu.Unlock()
	if late && !dead {
		a.jobs.EndSandbox(spec.ID, why, false)
		dead = true
	}
	frozen := keepFrozen && a.limits.freezeTakenOver(ctx, be, spec.ID)
	if !frozen {
		// Restored from a suspension with its memory (or never
		// suspended): its held jobs are reached again.
		a.jobs.UnparkSandbox(spec.ID)
	}
	if dead {
		a.jobs.ResumeAdmission(spec.ID)
	}
	if (!served || unadopted) && !dead && !frozen && !blank {
		// The first Ensure of this agent process: the sandbox may hold
		// jobs that an earlier one started. They count before its tenant
		// can start more.
		actx, cancel := context.WithTimeout(ctx, a.opts.AdoptTimeout)
		err := a.execs.adoptJobs(actx, be, spec)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("sandbox %s did not hand over the jobs it holds within %s: its processes may have used up its PID limit or its memory, which its supervision needs; restart it to recover (kubectl playground tenant restart): %w",
					spec.ID, a.opts.AdoptTimeout, err)
			}
			return false, err
		}
	}
	// Running now (or frozen as it was): the limiter looks at it again.
	defer a.limits.checkLimitSoon(spec.ID)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settlePendingLocked(spec.ID)
	delete(a.pending, spec.ID)
	if s, ok := a.sandboxes[spec.ID]; ok {
		s.spec = spec
		s.suspended, s.keptMemory = false, false
		a.idle.woken(spec.ID, false)
		// It died frozen, and started again: what the freeze caught is
		// gone with it.
		a.limits.unfreeze(spec.ID)
		a.limits.adopted(spec.ID) // adopted above, or gone with its processes
		// A key installed for the next start is in now.
		a.keys.started(spec.ID, key, dead)
		a.noteStateLocked(s)
		return dead, nil
	}
	a.keys.track(spec.ID, key)
	a.idle.track(spec.ID)
	a.limits.track(spec.ID, frozen)
	s = &sandbox{spec: spec, be: be}
	a.sandboxes[spec.ID] = s
	a.noteStateLocked(s)
	return dead, nil
}

// Restart kills every process of a sandbox and starts it again over its
// files. Its running jobs end (failed, with why), its open handles stay,
// and a halt of its job admission is lifted: the restart is the proof that
// nothing of a job whose kill was not proven still runs.
func (a *Agent) Restart(ctx context.Context, spec backend.Spec) error {
	be, err := a.backendFor(spec)
	if err != nil {
		return err
	}
	a.mu.Lock()
	s, served := a.sandboxes[spec.ID]
	a.mu.Unlock()
	if served {
		s.transit.Lock()
		defer s.transit.Unlock()
	}
	a.mu.Lock()
	if served {
		a.idle.woken(spec.ID, true) // a restart wakes it, afresh
		// And kills what a freeze for its usage limit held: started
		// again, it is frozen again at once while the limit is spent.
		a.limits.unfreeze(spec.ID)
		a.limits.adopted(spec.ID)
	}
	a.jobs.UnparkSandbox(spec.ID)
	a.mu.Unlock()
	a.jobs.EndSandbox(spec.ID, "the sandbox was restarted by an operator, which killed every process in it; the job's output so far is kept", false)
	if err := be.Stop(ctx, spec.ID); err != nil {
		return fmt.Errorf("stopping sandbox %s: %w", spec.ID, err)
	}
	a.sampleNow(be, spec.ID)
	if _, err := a.ensure(ctx, spec, served); err != nil {
		return err
	}
	a.jobs.ResumeAdmission(spec.ID)
	return nil
}

// Suspension is how a sandbox was suspended.
type Suspension struct {
	// KeptMemory: its backend saved its memory, processes and held jobs
	// (backend.Suspender), which go on when Ensure restores it.
	KeptMemory bool
	// Note says why its memory was not kept, when it was not and the
	// backend said why (backend.ErrNoCheckpoint).
	Note string
}

// Suspend stops a sandbox's compute and keeps its files; its handles
// close. Where its backend can (backend.Suspender), its memory is kept too:
// its processes and the jobs it holds are saved to the node's disk and go
// on, not started again, when Ensure restores it; its jobs stay running,
// their polls answered as suspended meanwhile. Otherwise its running jobs
// end (failed, with why) and every process in it is killed; Ensure starts
// it again.
func (a *Agent) Suspend(ctx context.Context, spec backend.Spec) (Suspension, error) {
	id := spec.ID
	be, err := a.backendFor(spec)
	if err != nil {
		return Suspension{}, err
	}
	// A suspension of the spec takes over from one for idleness; a frozen
	// sandbox is thawed first, or nothing in it would answer. One frozen
	// for its usage limit is thawed only to be checkpointed with its
	// memory (a moment's run): a stop kills it frozen.
	a.mu.Lock()
	s, ok := a.sandboxes[id]
	a.mu.Unlock()
	if ok {
		s.transit.Lock()
		defer s.transit.Unlock()
	}
	_, pausedAsleep := a.idle.sleeping(id)
	paused := ok && (pausedAsleep || (a.limits.frozen(id) && checkpoints(be, spec)))
	if p := be.Capabilities().Pauser; paused && p != nil {
		if err := p.Unpause(ctx, id); err != nil {
			return Suspension{}, fmt.Errorf("thawing sandbox %s, frozen, to suspend it: %w", id, err)
		}
		a.jobs.UnparkSandbox(id)
	}
	a.mu.Lock()
	a.sessions.dropSandbox(id)
	s, ok = a.sandboxes[id]
	if ok {
		s.spec, s.suspended = spec, true
		a.idle.woken(id, false)
		a.limits.unfreeze(id)
	} else {
		s = &sandbox{spec: spec, be: be, suspended: true}
		a.sandboxes[id] = s
		a.keys.track(id, nil)
		a.idle.track(id)
		a.limits.track(id, false)
	}
	a.mu.Unlock()
	// Its state is noted once the suspension is done: with its memory or
	// without.
	noted := func(sus Suspension) {
		a.mu.Lock()
		s.keptMemory = sus.KeptMemory
		a.noteStateLocked(s)
		a.mu.Unlock()
	}
	if sus := be.Capabilities().Suspender; sus != nil && sus.Checkpointed(id) {
		noted(Suspension{KeptMemory: true})
		return Suspension{KeptMemory: true}, nil // an earlier Suspend's
	}
	sus, err := a.suspendOrStop(ctx, be, id, "the tenant was suspended, which stopped every process in its sandbox; the job's output so far is kept")
	if sus.KeptMemory {
		a.opts.Logger.Info("Suspended a sandbox with its memory", "sandbox", id)
	}
	noted(sus)
	return sus, err
}

// errNotSuspended: the backend could not checkpoint a sandbox that runs
// on; nothing was stopped, and the caller may try again.
var errNotSuspended = errors.New("not suspended")

// suspendOrStop suspends sandbox id with its memory where be can (its held
// jobs parked meanwhile, to go on when it is restored), and otherwise stops
// it, ending its running jobs with why. A checkpoint that failed while the
// sandbox runs on stops nothing: its error wraps errNotSuspended.
func (a *Agent) suspendOrStop(ctx context.Context, be backend.Backend, id, why string) (Suspension, error) {
	var note string
	if sus := be.Capabilities().Suspender; sus != nil {
		a.jobs.ParkSandbox(id)
		err := sus.Suspend(ctx, id)
		switch {
		case err == nil:
			a.sampleNow(be, id)
			return Suspension{KeptMemory: true}, nil
		case errors.Is(err, backend.ErrNoCheckpoint):
			note = err.Error()
		case errors.Is(err, backend.ErrNotFound), errors.Is(err, backend.ErrNotRunning):
			// Nothing runs to keep: stopped below, as any.
		case aliveOn(be, id):
			a.jobs.UnparkSandbox(id)
			return Suspension{}, fmt.Errorf("suspending sandbox %s with its memory: %w (%w)", id, err, errNotSuspended)
		default:
			// The checkpoint failed half-way, which ended the sandbox.
			note = err.Error()
		}
		a.jobs.UnparkSandbox(id)
	}
	a.jobs.EndSandbox(id, why, false)
	if err := be.Stop(ctx, id); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return Suspension{Note: note}, fmt.Errorf("stopping sandbox %s: %w", id, err)
	}
	// Stopped, every process of it is gone: no halt can outlive that.
	a.jobs.ResumeAdmission(id)
	// What it used up to its stop, which the backend kept, is in the
	// book at once.
	a.sampleNow(be, id)
	return Suspension{Note: note}, nil
}

// sampleNow reads sandbox id's counters into the book at once (after a
// stop, whose last count the backend kept) and writes the book.
func (a *Agent) sampleNow(be backend.Backend, id string) {
	m := be.Capabilities().UsageMeter
	if m == nil {
		return
	}
	u, ok := m.SandboxUsage(id, false)
	if !ok {
		return
	}
	a.usage.sampleNow(id, u, a.clock.Now())
}

// Checkpointed says whether the sandbox is suspended with its memory, to
// be restored as it was by the next Ensure.
func (a *Agent) Checkpointed(spec backend.Spec) bool {
	be, err := a.backendFor(spec)
	if err != nil {
		return false
	}
	sus := be.Capabilities().Suspender
	return sus != nil && sus.Checkpointed(spec.ID)
}

// Remove stops serving a sandbox and destroys it: its handles are closed
// and its backend resources removed; the pile stays when keepPile. A
// sandbox this agent does not serve (deleted while no agent ran) is
// destroyed on whichever backend has it.
func (a *Agent) Remove(ctx context.Context, id string, keepPile bool) error {
	a.mu.Lock()
	a.sessions.dropSandbox(id)
	var bes []backend.Backend
	if s, ok := a.sandboxes[id]; ok {
		bes = []backend.Backend{s.be}
	} else {
		bes = a.backends
	}
	delete(a.sandboxes, id)
	a.pools.takeBlank(id)
	a.calls.forget(id)
	a.idle.forget(id)
	a.limits.forget(id)
	a.settlePendingLocked(id)
	delete(a.pending, id)
	a.keys.forget(id) // its waiting calls find it gone
	a.mu.Unlock()
	// Its jobs go with it, read or not: a deleted tenant holds no slot.
	a.jobs.EndSandbox(id, "the sandbox was deleted", true)
	for _, be := range bes {
		if err := be.Destroy(ctx, id, keepPile); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return fmt.Errorf("destroying sandbox %s: %w", id, err)
		}
	}
	return nil
}

// Serves says whether this agent serves sandbox id (Ensure took it).
func (a *Agent) Serves(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.sandboxes[id]
	return ok
}

// Alive says whether the sandbox's init still runs, when the backend can
// tell (backend.Prober); otherwise true. A suspended sandbox is as it
// should be: true.
func (a *Agent) Alive(id string) bool {
	a.mu.Lock()
	s, ok := a.sandboxes[id]
	suspended := ok && (s.suspended || a.idle.Asleep(id) || a.snaps.taking(id)) // written under its transit lock by Ensure, Suspend and sleep
	a.mu.Unlock()
	if !ok || suspended {
		return true // not served here, or stopped on purpose: nothing is to run
	}
	return aliveOn(s.be, id)
}

// aliveOn asks a backend whether the sandbox's init runs, when it can
// tell.
// startsOf is how many inits the backend started for sandbox id, when it
// counts them (backend.StartCounter).
func startsOf(be backend.Backend, id string) (uint64, bool) {
	if c := be.Capabilities().StartCounter; c != nil {
		return c.Starts(id), true
	}
	return 0, false
}

func aliveOn(be backend.Backend, id string) bool {
	if p := be.Capabilities().Prober; p != nil {
		return p.Alive(id)
	}
	return true
}

// Pending records the sandboxes (ID to tenant) that an agent that just
// started will take over: until Ensure has, calls for them are answered as
// unavailable (retry), not as for a sandbox that is not here.
func (a *Agent) Pending(sandboxes map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, tenant := range sandboxes {
		if _, served := a.sandboxes[id]; !served {
			a.pending[id] = pendingSandbox{tenant: tenant, settled: make(chan struct{})}
		}
	}
}

// settlePendingLocked ends a pending sandbox's wait, once.
func (a *Agent) settlePendingLocked(id string) {
	if p, ok := a.pending[id]; ok {
		select {
		case <-p.settled:
		default:
			close(p.settled)
		}
	}
}

// waitPending waits, up to pendingWait, until the tenant's pending
// sandbox (sandboxID, or any of the tenant's when empty) is settled, and
// returns the answer to give if it is still not served, or nil.
func (a *Agent) waitPending(ctx context.Context, tenant, sandboxID string) error {
	a.mu.Lock()
	var settled chan struct{}
	for id, p := range a.pending {
		if p.tenant == tenant && (sandboxID == "" || id == sandboxID) && p.failed == "" {
			settled = p.settled
			break
		}
	}
	a.mu.Unlock()
	if settled != nil {
		t := time.NewTimer(pendingWait)
		select {
		case <-settled:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.pendingErrorLocked(tenant, sandboxID)
}

// PendingFailed records why taking over a pending sandbox failed: its
// tenant's calls say so until an Ensure succeeds.
func (a *Agent) PendingFailed(id string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pending[id]; ok {
		p.failed = err.Error()
		a.pending[id] = p
		a.settlePendingLocked(id)
	}
}

// pendingErrorLocked is the answer for a tenant whose sandbox is still to
// be taken over, or nil.
func (a *Agent) pendingErrorLocked(tenant, sandboxID string) error {
	for id, p := range a.pending {
		if p.tenant != tenant || (sandboxID != "" && id != sandboxID) {
			continue
		}
		if p.failed != "" {
			return errorf(agentapi.CodeUnavailable, "your sandbox was not taken over by its node's agent, which restarted: %s; the agent retries", p.failed)
		}
		return errorf(agentapi.CodeUnavailable, "your sandbox is being taken over by its node's agent, which restarted: retry in a few seconds")
	}
	return nil
}
