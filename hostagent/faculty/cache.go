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

// Package faculty is a node's cache of FacultyBundle builds: one directory
// per content fingerprint under <state>/faculties, holding the staged
// binaries and, written last, a completion stamp. A build is made at most
// once per fingerprint on the node at a time, however many sandboxes wait
// for it, in a throwaway sandbox of the node's backend (backend.Builder);
// only the bundle's allowlist of binaries is staged, copied as regular
// files. A directory without its stamp (an agent killed mid-build) is
// discarded when the cache opens, and built again when asked for.
//
// Layout of one build:
//
//	<state>/faculties/<fingerprint>/bin/<binary>   the staged binaries, 0555 (Build.Dir)
//	<state>/faculties/<fingerprint>/build.json     bundle, binaries, build time
//	<state>/faculties/<fingerprint>/.complete      the stamp, written last
//
// bin holds the binaries and nothing else, so that it can be mounted in a
// sandbox as it is.
package faculty

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/internal/atomicfile"
	"github.com/playground-dev/playground/internal/fingerprint"
)

// Defaults of Options.
const (
	// DefaultCPUMillis, DefaultMemoryBytes and DefaultStorageBytes bound a
	// builder: one CPU, 1 GiB of memory, 2 GiB of disk.
	DefaultCPUMillis    = 1000
	DefaultMemoryBytes  = 1 << 30
	DefaultStorageBytes = 2 << 30
	// DefaultTimeout bounds a build whose request names none (the API's
	// default for spec.build.timeout).
	DefaultTimeout = 10 * time.Minute
	// DefaultMaxTimeout caps every build's timeout, whatever the request
	// asks (the API's maximum for spec.build.timeout).
	DefaultMaxTimeout = time.Hour
	// DefaultRetryAfter is how long a failed build is remembered: asked
	// again within it, the cache answers with the failure instead of
	// building again, so a failing bundle is not rebuilt in a hot loop.
	DefaultRetryAfter = time.Minute
)

// Names inside the cache directory.
const (
	binDir    = "bin"
	metaFile  = "build.json"
	stampFile = ".complete"
	tmpPrefix = ".tmp-"
)

// Options configure a Cache.
type Options struct {
	// Dir is the cache's directory, <state>/faculties; it is created.
	Dir string
	// Builder runs builds; nil when the node cannot build (a bundle with a
	// build command then fails with a message that says so).
	Builder backend.Builder
	// Resources and Storage bound each builder (zero fields: the defaults
	// above).
	Resources backend.Resources
	Storage   backend.Storage
	// RetryAfter is how long a failure is remembered (DefaultRetryAfter).
	RetryAfter time.Duration
	// MaxTimeout caps each build's timeout (DefaultMaxTimeout): a request
	// asking more is built with MaxTimeout, and a build killed at it says
	// so. A builder holds a CPU, memory and disk of the node for as long
	// as it runs.
	MaxTimeout time.Duration
	// Logger logs builds; the zero value discards.
	Logger logr.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Request is one bundle's build.
type Request struct {
	// Bundle is the FacultyBundle, namespace/name, recorded with the
	// build for garbage collection.
	Bundle string
	// Files is the source tree, as fingerprint.Dir or
	// fingerprint.ConfigMapFiles give it: the build sees exactly the
	// bytes that were fingerprinted.
	Files []fingerprint.File
	// Command is the build's argv; empty takes the binaries from the
	// source tree as they are.
	Command []string
	// Timeout bounds the build (DefaultTimeout when zero), up to the
	// cache's MaxTimeout.
	Timeout time.Duration
	// Binaries is the allowlist of files staged.
	Binaries []string
}

// Fingerprint is the request's content fingerprint, the build's key.
func (r Request) Fingerprint() (string, error) {
	return fingerprint.Of(fingerprint.Inputs{Files: r.Files, Command: r.Command, Binaries: r.Binaries, Builder: fingerprint.Builder})
}

// Build is a completed build in the cache.
type Build struct {
	Fingerprint string `json:"fingerprint"`
	// Bundle is the namespace/name of the bundle that asked for it first.
	Bundle string `json:"bundle"`
	// Binaries are the staged file names, in Dir.
	Binaries []string  `json:"binaries"`
	BuiltAt  time.Time `json:"builtAt"`
	// Dir holds the staged binaries and nothing else.
	Dir string `json:"-"`
}

// Faculty is the build as a backend installs it, under the bundle's name.
func (b Build) Faculty(name string) backend.Faculty {
	return backend.Faculty{Name: name, Fingerprint: b.Fingerprint, Dir: b.Dir, Binaries: slices.Clone(b.Binaries)}
}

// BuildError is a build that failed: the command failed, timed out, or
// did not produce a listed binary, or the builder could not run.
type BuildError struct {
	Fingerprint string
	// Message says what failed, for a status message.
	Message string
	// Log is the tail of the build's output, if it ran.
	Log string
	// At is when it failed; the cache answers with it until RetryAfter
	// has passed.
	At time.Time
}

func (e *BuildError) Error() string { return e.Message }

// State is where a fingerprint stands in the cache.
type State int

const (
	// Absent is a fingerprint never built here, or whose failure is
	// forgotten.
	Absent State = iota
	// Building is a fingerprint whose build runs now.
	Building
	// Ready is a fingerprint built and stamped.
	Ready
	// Failed is a fingerprint whose last build failed within RetryAfter.
	Failed
)

func (s State) String() string {
	return [...]string{"absent", "building", "ready", "failed"}[s]
}

// Cache is a node's build cache. It is safe for concurrent use.
type Cache struct {
	opts    Options
	metrics *metrics

	mu       sync.Mutex
	flights  map[string]*flight
	failures map[string]*BuildError
}

// flight is a build in progress, shared by every caller that waits.
type flight struct {
	done  chan struct{}
	build Build
	err   error
}

// New opens the cache: it creates the directory and removes every build
// without its stamp and every staging area left by an agent that stopped
// mid-build.
func New(opts Options) (*Cache, error) {
	if opts.Dir == "" || !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("faculty: the cache directory %q must be an absolute path", opts.Dir)
	}
	setDefault(&opts.Resources.CPUMillis, DefaultCPUMillis)
	setDefault(&opts.Resources.MemoryBytes, DefaultMemoryBytes)
	setDefault(&opts.Storage.LayerBytes, DefaultStorageBytes)
	setDefault(&opts.RetryAfter, DefaultRetryAfter)
	setDefault(&opts.MaxTimeout, DefaultMaxTimeout)
	if opts.MaxTimeout < 0 {
		return nil, fmt.Errorf("faculty: the maximum build timeout %s must be positive", opts.MaxTimeout)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// Traversable, not listable: builders and sandboxes reach their own
	// build's directory through it.
	if err := os.MkdirAll(opts.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("faculty: %w", err)
	}
	if err := os.Chmod(opts.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("faculty: %w", err)
	}
	c := &Cache{opts: opts, metrics: newMetrics(), flights: map[string]*flight{}, failures: map[string]*BuildError{}}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("faculty: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(opts.Dir, name)
		switch {
		case strings.HasPrefix(name, tmpPrefix):
		case fingerprintPattern.MatchString(name) && e.IsDir():
			if _, err := os.Stat(filepath.Join(p, stampFile)); err == nil {
				continue
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("faculty: %w", err)
			}
			opts.Logger.Info("Discarding a faculty build without its completion stamp (the agent stopped while building it); it is built again when needed", "fingerprint", name)
		default:
			continue // not ours: left alone
		}
		if err := removeAll(p); err != nil {
			return nil, fmt.Errorf("faculty: discarding an unfinished build: %w", err)
		}
	}
	return c, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

var fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.opts.Dir }

// Lookup says where fp stands without building: a Ready build, a
// remembered failure, a build in progress, or nothing.
func (c *Cache) Lookup(fp string) (Build, State, *BuildError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(fp)
}

func (c *Cache) lookupLocked(fp string) (Build, State, *BuildError) {
	if !fingerprintPattern.MatchString(fp) {
		return Build{}, Absent, nil
	}
	if b, err := c.read(fp); err == nil {
		return b, Ready, nil
	}
	if _, ok := c.flights[fp]; ok {
		return Build{}, Building, nil
	}
	if f, ok := c.failures[fp]; ok {
		if c.opts.Now().Sub(f.At) < c.opts.RetryAfter {
			return Build{}, Failed, f
		}
		delete(c.failures, fp)
	}
	return Build{}, Absent, nil
}

// read returns the stamped build of fp on disk.
func (c *Cache) read(fp string) (Build, error) {
	dir := filepath.Join(c.opts.Dir, fp)
	if _, err := os.Stat(filepath.Join(dir, stampFile)); err != nil {
		return Build{}, err
	}
	data, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return Build{}, err
	}
	var b Build
	if err := json.Unmarshal(data, &b); err != nil {
		return Build{}, fmt.Errorf("%s: %w", filepath.Join(dir, metaFile), err)
	}
	if b.Fingerprint != fp {
		return Build{}, fmt.Errorf("%s records fingerprint %s", dir, b.Fingerprint)
	}
	b.Dir = filepath.Join(dir, binDir)
	return b, nil
}

// Ensure returns the build of req, building it if the cache has none. One
// build per fingerprint runs at a time: concurrent callers wait for it and
// share its result. A failure is returned as a *BuildError, and
// remembered: asked again within RetryAfter, Ensure answers with it
// without building.
func (c *Cache) Ensure(ctx context.Context, req Request) (Build, error) {
	fp, err := req.Fingerprint()
	if err != nil {
		return Build{}, &BuildError{Message: fmt.Sprintf("the source of bundle %s: %v", req.Bundle, err), At: c.opts.Now()}
	}
	for {
		c.mu.Lock()
		b, state, failure := c.lookupLocked(fp)
		switch state {
		case Ready:
			c.mu.Unlock()
			return b, nil
		case Failed:
			c.mu.Unlock()
			return Build{}, failure
		case Building:
			f := c.flights[fp]
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return Build{}, ctx.Err()
			}
			if f.err != nil && isContextError(f.err) && ctx.Err() == nil {
				continue // the builder's caller went away, not ours: build again
			}
			return f.build, f.err
		}
		f := &flight{done: make(chan struct{})}
		c.flights[fp] = f
		c.mu.Unlock()

		f.build, f.err = c.build(ctx, fp, req)
		c.mu.Lock()
		delete(c.flights, fp)
		var be *BuildError
		if errors.As(f.err, &be) {
			c.failures[fp] = be
		}
		c.mu.Unlock()
		close(f.done)
		return f.build, f.err
	}
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// build makes the build of fp in a private staging area and moves it into
// place; the stamp is written last. A context error is returned as it is
// (the caller went away; nothing is remembered), any other failure as a
// *BuildError.
func (c *Cache) build(ctx context.Context, fp string, req Request) (Build, error) {
	log := c.opts.Logger.WithValues("bundle", req.Bundle, "fingerprint", fp)
	start := c.opts.Now()
	b, logTail, err := c.stage(ctx, fp, req)
	elapsed := c.opts.Now().Sub(start)
	switch {
	case err == nil:
		c.metrics.observe(outcomeSucceeded, elapsed)
		log.Info("Built the faculty bundle", "duration", elapsed.String())
		return b, nil
	case ctx.Err() != nil && isContextError(err):
		c.metrics.observe(outcomeCancelled, elapsed)
		return Build{}, err
	}
	c.metrics.observe(outcomeFailed, elapsed)
	be := &BuildError{Fingerprint: fp, Message: err.Error(), Log: logTail, At: c.opts.Now()}
	log.Info("Building the faculty bundle failed", "error", be.Message)
	return Build{}, be
}

// stage materialises the source, runs the build, stages the allowlist
// and commits the build. It returns the build log's tail, if a build ran.
func (c *Cache) stage(ctx context.Context, fp string, req Request) (Build, string, error) {
	tmp, err := os.MkdirTemp(c.opts.Dir, tmpPrefix)
	if err != nil {
		return Build{}, "", err
	}
	defer func() { _ = removeAll(tmp) }()
	if err := os.Chmod(tmp, 0o711); err != nil {
		return Build{}, "", err
	}
	src := filepath.Join(tmp, "src")
	if err := materialise(src, req.Files); err != nil {
		return Build{}, "", fmt.Errorf("writing the source tree: %w", err)
	}
	from, logTail := src, ""
	if len(req.Command) > 0 {
		if c.opts.Builder == nil {
			return Build{}, "", errors.New("this node's backend cannot build bundles: remove spec.build and ship the binaries in the source, or run the bundle's sandboxes on a node whose backend builds")
		}
		out := filepath.Join(tmp, "out")
		if err := os.Mkdir(out, 0o755); err != nil {
			return Build{}, "", err
		}
		asked := req.Timeout
		if asked <= 0 {
			asked = DefaultTimeout
		}
		timeout := min(asked, c.opts.MaxTimeout)
		res, err := c.opts.Builder.Build(ctx, backend.BuildRequest{
			ID:        NewBuildID(),
			Source:    src,
			Out:       out,
			Command:   slices.Clone(req.Command),
			Timeout:   timeout,
			Resources: c.opts.Resources,
			Storage:   c.opts.Storage,
		})
		logTail = string(res.Log)
		if err != nil {
			if ctx.Err() != nil {
				return Build{}, logTail, ctx.Err()
			}
			return Build{}, logTail, fmt.Errorf("the builder failed: %w", err)
		}
		if msg := exitMessage(res.Exit, timeout, asked); msg != "" {
			return Build{}, logTail, errors.New(msg)
		}
		from = out
	}
	staged := filepath.Join(tmp, fp)
	if err := os.Mkdir(staged, 0o755); err != nil {
		return Build{}, logTail, err
	}
	if err := stageBinaries(from, filepath.Join(staged, binDir), req.Binaries, len(req.Command) > 0); err != nil {
		return Build{}, logTail, err
	}
	b := Build{Fingerprint: fp, Bundle: req.Bundle, Binaries: sortedCopy(req.Binaries), BuiltAt: c.opts.Now().UTC().Truncate(time.Second)}
	meta, err := json.Marshal(b)
	if err != nil {
		return Build{}, logTail, err
	}
	if err := writeFileSync(filepath.Join(staged, metaFile), meta, 0o444); err != nil {
		return Build{}, logTail, err
	}
	if err := atomicfile.SyncDir(staged); err != nil {
		return Build{}, logTail, err
	}
	final := filepath.Join(c.opts.Dir, fp)
	if err := removeAll(final); err != nil { // an unstamped leftover
		return Build{}, logTail, err
	}
	if err := os.Rename(staged, final); err != nil {
		return Build{}, logTail, err
	}
	if err := atomicfile.SyncDir(c.opts.Dir); err != nil {
		return Build{}, logTail, err
	}
	if err := writeStamp(final); err != nil {
		return Build{}, logTail, err
	}
	b.Dir = filepath.Join(final, binDir)
	return b, logTail, nil
}

// exitMessage says why a build's exit is a failure, or "" for success.
// timeout is the one the build ran with, asked the bundle's.
func exitMessage(st backend.ExitStatus, timeout, asked time.Duration) string {
	switch {
	case st.Killed && timeout < asked:
		return fmt.Sprintf("the build command was killed after %s, this node's maximum build timeout (the agent's --faculty-max-build-timeout, chart value agent.facultyBuilder.maxTimeout), shorter than the %s spec.build.timeout asks", timeout, asked)
	case st.Killed:
		return fmt.Sprintf("the build command was killed after its timeout of %s (spec.build.timeout)", timeout)
	case st.OOMKilled:
		return "the build command ran out of memory in the builder"
	case st.Signal != "":
		return fmt.Sprintf("the build command was killed by %s", st.Signal)
	case st.ExitCode != 0:
		return fmt.Sprintf("the build command exited with code %d", st.ExitCode)
	}
	return ""
}

// writeStamp marks dir complete, durably and atomically, so that a stamp
// on disk always follows everything it vouches for.
func writeStamp(dir string) error {
	return atomicfile.Write(filepath.Join(dir, stampFile), []byte("complete\n"), 0o444)
}

// NewBuildID returns a fresh ID for a throwaway builder: the shape of a
// sandbox ID (a short prefix and 20 hex digits), with a prefix, "bld-",
// that no tenant's sandbox has.
func NewBuildID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return BuildIDPrefix + hex.EncodeToString(b[:])
}

// BuildIDPrefix starts every builder's ID.
const BuildIDPrefix = "bld-"

// Builds lists the stamped builds in the cache.
func (c *Cache) Builds() ([]Build, error) {
	entries, err := os.ReadDir(c.opts.Dir)
	if err != nil {
		return nil, err
	}
	var out []Build
	for _, e := range entries {
		if !fingerprintPattern.MatchString(e.Name()) {
			continue
		}
		if b, err := c.read(e.Name()); err == nil {
			out = append(out, b)
		}
	}
	return out, nil
}

// Collect removes stale builds: for each bundle (namespace/name) in keep,
// every build but its newest keep[bundle] is removed, and every build of a
// bundle not in keep, except builds in inUse (sandboxes run them, or they
// are a bundle's current build). It returns the fingerprints removed.
func (c *Cache) Collect(inUse map[string]bool, keep map[string]int) ([]string, error) {
	builds, err := c.Builds()
	if err != nil {
		return nil, err
	}
	byBundle := map[string][]Build{}
	for _, b := range builds {
		if !inUse[b.Fingerprint] {
			byBundle[b.Bundle] = append(byBundle[b.Bundle], b)
		}
	}
	var removed []string
	var errs []error
	for bundle, stale := range byBundle {
		sort.Slice(stale, func(i, j int) bool { return stale[i].BuiltAt.After(stale[j].BuiltAt) })
		n := keep[bundle] // 0 for a bundle gone
		if n > len(stale) {
			n = len(stale)
		}
		for _, b := range stale[n:] {
			c.mu.Lock()
			_, building := c.flights[b.Fingerprint]
			var err error
			if !building {
				err = c.remove(b.Fingerprint)
			}
			c.mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !building {
				c.opts.Logger.Info("Removed a stale faculty build", "bundle", bundle, "fingerprint", b.Fingerprint)
				removed = append(removed, b.Fingerprint)
			}
		}
	}
	return removed, errors.Join(errs...)
}

// remove deletes a build: its stamp first, so that a crash halfway leaves
// an unstamped directory, which the next start discards.
func (c *Cache) remove(fp string) error {
	dir := filepath.Join(c.opts.Dir, fp)
	if err := os.Remove(filepath.Join(dir, stampFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := atomicfile.SyncDir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return removeAll(dir)
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// RetryAfter is how long the cache remembers a failed build.
func (c *Cache) RetryAfter() time.Duration { return c.opts.RetryAfter }
