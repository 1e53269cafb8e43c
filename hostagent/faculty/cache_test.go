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

package faculty

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/internal/fingerprint"
)

// builderFunc stands in for a backend's throwaway builder (the oci
// backend's Build runs the command in a runc container): here the build
// is a Go function over the same /src and /out host directories.
type builderFunc func(req backend.BuildRequest) (backend.BuildResult, error)

func (f builderFunc) Build(_ context.Context, req backend.BuildRequest) (backend.BuildResult, error) {
	return f(req)
}

// copyBuild copies /src's regular files to /out, as the sample bundle's
// command does.
func copyBuild(req backend.BuildRequest) (backend.BuildResult, error) {
	entries, err := os.ReadDir(req.Source)
	if err != nil {
		return backend.BuildResult{}, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(req.Source, e.Name()))
		if err != nil {
			return backend.BuildResult{}, err
		}
		if err := os.WriteFile(filepath.Join(req.Out, e.Name()), data, 0o755); err != nil {
			return backend.BuildResult{}, err
		}
	}
	return backend.BuildResult{Log: []byte("copied\n")}, nil
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newCache(t *testing.T, dir string, b backend.Builder, clk *clock) *Cache {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "faculties")
	}
	opts := Options{Dir: dir, Builder: b}
	if clk != nil {
		opts.Now = clk.Now
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func request(content string) Request {
	return Request{
		Bundle:   "ns/hello",
		Files:    fingerprint.ConfigMapFiles(map[string]string{"hello": content, "notes.txt": "not a binary\n"}, nil),
		Command:  []string{"/bin/sh", "-c", "cp /src/hello /out/hello"},
		Binaries: []string{"hello"},
	}
}

// N callers of one fingerprint: one build, whose result they all share;
// a later caller gets it from the disk without a build.
func TestOneBuildForManyCallers(t *testing.T) {
	var builds atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	c := newCache(t, "", builderFunc(func(req backend.BuildRequest) (backend.BuildResult, error) {
		builds.Add(1)
		started <- struct{}{}
		<-release
		return copyBuild(req)
	}), nil)
	req := request("#!/bin/sh\necho hello\n")
	fp, err := req.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}

	const n = 16
	results := make(chan Build, n)
	errs := make(chan error, n)
	go func() {
		b, err := c.Ensure(context.Background(), req)
		results <- b
		errs <- err
	}()
	<-started
	if _, state, _ := c.Lookup(fp); state != Building {
		t.Fatalf("Lookup during the build: %s, want building", state)
	}
	var wg sync.WaitGroup
	for range n - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := c.Ensure(context.Background(), req)
			results <- b
			errs <- err
		}()
	}
	// Every caller is waiting on the one flight before it lands.
	waitFor(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.flights[fp] != nil })
	close(release)
	wg.Wait()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
		if b := <-results; b.Fingerprint != fp || b.Dir != filepath.Join(c.Dir(), fp, "bin") {
			t.Fatalf("a caller got %+v", b)
		}
	}
	if got := builds.Load(); got != 1 {
		t.Fatalf("%d builds for %d callers of one fingerprint, want 1", got, n)
	}
	if _, err := c.Ensure(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := builds.Load(); got != 1 {
		t.Fatalf("a cached fingerprint was built again (%d builds)", got)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c.Collector()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			outcome := m.GetLabel()[0].GetValue()
			switch mf.GetName() {
			case "playground_faculty_builds_total":
				counts["builds/"+outcome] = m.GetCounter().GetValue()
			case "playground_faculty_build_duration_seconds":
				counts["durations/"+outcome] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{"builds/succeeded": 1, "builds/failed": 0, "builds/cancelled": 0,
		"durations/succeeded": 1, "durations/failed": 0, "durations/cancelled": 0}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("metrics %v, want %v: one build for all callers, a cache hit is no build", counts, want)
	}
}

// waitFor polls a condition of the cache's own state that the test cannot
// be told of otherwise; it fails after a bound.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met")
		}
		time.Sleep(time.Millisecond)
	}
}

// A build is its allowlisted binaries, 0555, the record and the stamp;
// the builder saw the source read at /src and its own ID.
func TestBuildLayoutAndStamp(t *testing.T) {
	var seen backend.BuildRequest
	c := newCache(t, "", builderFunc(func(req backend.BuildRequest) (backend.BuildResult, error) {
		seen = req
		return copyBuild(req)
	}), nil)
	req := request("#!/bin/sh\necho hello\n")
	req.Timeout = 42 * time.Second
	b, err := c.Ensure(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(seen.ID, BuildIDPrefix) || len(seen.ID) != len(BuildIDPrefix)+20 || seen.Timeout != 42*time.Second ||
		seen.Resources.CPUMillis != DefaultCPUMillis || seen.Resources.MemoryBytes != DefaultMemoryBytes || seen.Storage.LayerBytes != DefaultStorageBytes {
		t.Fatalf("build request %+v", seen)
	}
	if NewBuildID() == seen.ID {
		t.Fatal("build IDs repeat")
	}
	root := filepath.Join(c.Dir(), b.Fingerprint)
	if names := list(t, root); fmt.Sprint(names) != "[.complete bin build.json]" {
		t.Fatalf("build directory holds %v", names)
	}
	if names := list(t, b.Dir); fmt.Sprint(names) != "[hello]" {
		t.Fatalf("staged %v, want the allowlist only", names)
	}
	fi, err := os.Lstat(filepath.Join(b.Dir, "hello"))
	if err != nil || fi.Mode() != 0o555 {
		t.Fatalf("staged binary: %v %v, want a regular file of mode 0555", fi.Mode(), err)
	}
	if data, _ := os.ReadFile(filepath.Join(b.Dir, "hello")); string(data) != "#!/bin/sh\necho hello\n" {
		t.Fatalf("staged %q", data)
	}
	// The temporary directories are gone.
	for _, n := range list(t, c.Dir()) {
		if strings.HasPrefix(n, tmpPrefix) {
			t.Fatalf("left %s behind", n)
		}
	}
	// A new cache over the directory finds the build.
	c2 := newCache(t, c.Dir(), nil, nil)
	if got, state, _ := c2.Lookup(b.Fingerprint); state != Ready || got.Dir != b.Dir || fmt.Sprint(got.Binaries) != "[hello]" || got.Bundle != "ns/hello" {
		t.Fatalf("reopened: %s %+v", state, got)
	}
}

func list(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// An agent killed mid-build leaves a directory without its stamp (and
// staging areas): the next cache discards them, and builds again.
func TestUnstampedBuildIsDiscarded(t *testing.T) {
	var builds atomic.Int32
	b := builderFunc(func(req backend.BuildRequest) (backend.BuildResult, error) { builds.Add(1); return copyBuild(req) })
	c := newCache(t, "", b, nil)
	req := request("#!/bin/sh\necho hello\n")
	built, err := c.Ensure(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The kill between the rename and the stamp, and one mid-staging.
	if err := os.Remove(filepath.Join(c.Dir(), built.Fingerprint, stampFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(c.Dir(), tmpPrefix+"123", "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.Dir(), "not-ours"), 0o755); err != nil {
		t.Fatal(err)
	}
	c2 := newCache(t, c.Dir(), b, nil)
	if names := list(t, c2.Dir()); fmt.Sprint(names) != "[not-ours]" {
		t.Fatalf("after the restart the cache holds %v, want the unfinished build and staging gone", names)
	}
	if _, state, _ := c2.Lookup(built.Fingerprint); state != Absent {
		t.Fatalf("an unstamped build is %s", state)
	}
	if _, err := c2.Ensure(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := builds.Load(); got != 2 {
		t.Fatalf("%d builds, want the discarded one built again", got)
	}
}

// Only regular files named in the allowlist are staged: a symbolic link
// or a directory of that name fails the build with a message naming it,
// and so does a missing one.
func TestStagingAllowlist(t *testing.T) {
	out := builderFunc(func(req backend.BuildRequest) (backend.BuildResult, error) {
		must(t, os.WriteFile(filepath.Join(req.Out, "hello"), []byte("hi"), 0o700))
		must(t, os.WriteFile(filepath.Join(req.Out, "extra"), []byte("x"), 0o755))
		must(t, os.Symlink("/etc/passwd", filepath.Join(req.Out, "link")))
		must(t, os.Mkdir(filepath.Join(req.Out, "dir"), 0o755))
		return backend.BuildResult{Log: []byte("built\n")}, nil
	})
	for _, tc := range []struct {
		binaries []string
		want     string
	}{
		{[]string{"hello"}, ""},
		{[]string{"hello", "link"}, `binary "link" in the build's output (/out) is a symbolic link, not a regular file`},
		{[]string{"dir"}, `binary "dir" in the build's output (/out) is a directory, not a regular file`},
		{[]string{"hello", "missing"}, `binary "missing" in the build's output (/out) is missing`},
	} {
		c := newCache(t, "", out, nil)
		req := request("x")
		req.Binaries = tc.binaries
		b, err := c.Ensure(context.Background(), req)
		if tc.want == "" {
			if err != nil {
				t.Fatal(err)
			}
			if names := list(t, b.Dir); fmt.Sprint(names) != "[hello]" {
				t.Fatalf("staged %v, want [hello] only", names)
			}
			continue
		}
		var be *BuildError
		if !errors.As(err, &be) || !strings.Contains(be.Message, tc.want) || be.Log != "built\n" {
			t.Fatalf("binaries %v: %v, want a build error %q with the log", tc.binaries, err, tc.want)
		}
		fp, _ := req.Fingerprint()
		if _, state, _ := c.Lookup(fp); state != Failed {
			t.Fatalf("binaries %v: %s after a failed build", tc.binaries, state)
		}
		if names := list(t, c.Dir()); len(names) != 0 {
			t.Fatalf("a failed build left %v", names)
		}
	}
}

// Without a build command the binaries come from the source tree, under
// the same rules.
func TestNoBuildCommand(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink("tool", filepath.Join(dir, "alias")))
	files, err := fingerprint.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, "", nil, nil)
	b, err := c.Ensure(context.Background(), Request{Bundle: "ns/t", Files: files, Binaries: []string{"tool"}})
	if err != nil {
		t.Fatal(err)
	}
	if names := list(t, b.Dir); fmt.Sprint(names) != "[tool]" {
		t.Fatalf("staged %v", names)
	}
	_, err = c.Ensure(context.Background(), Request{Bundle: "ns/t", Files: files, Binaries: []string{"alias"}})
	if err == nil || !strings.Contains(err.Error(), `binary "alias" in the source tree is a symbolic link`) {
		t.Fatalf("staging a symbolic link from the source: %v", err)
	}
	// A build command on a node that cannot build says so.
	_, err = c.Ensure(context.Background(), request("x"))
	if err == nil || !strings.Contains(err.Error(), "cannot build") {
		t.Fatalf("a build without a builder: %v", err)
	}
}

// A failed build is remembered for RetryAfter: asked again, the cache
// answers with the failure, and builds again only after it.
func TestFailureIsRememberedThenRetried(t *testing.T) {
	var builds atomic.Int32
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newCache(t, "", builderFunc(func(_ backend.BuildRequest) (backend.BuildResult, error) {
		builds.Add(1)
		return backend.BuildResult{Exit: backend.ExitStatus{ExitCode: 2}, Log: []byte("cc: error: hello.c: no such file\n")}, nil
	}), clk)
	req := request("x")
	_, err := c.Ensure(context.Background(), req)
	var be *BuildError
	if !errors.As(err, &be) || be.Message != "the build command exited with code 2" || !strings.Contains(be.Log, "no such file") {
		t.Fatalf("%v", err)
	}
	_, err2 := c.Ensure(context.Background(), req)
	if err2 != err || builds.Load() != 1 {
		t.Fatalf("asked again at once: %v, %d builds; want the remembered failure", err2, builds.Load())
	}
	clk.Add(DefaultRetryAfter)
	if _, err := c.Ensure(context.Background(), req); err == nil || builds.Load() != 2 {
		t.Fatalf("after the backoff: %v, %d builds; want a new attempt", err, builds.Load())
	}
}

// A build killed by its timeout says which.
func TestTimeoutMessage(t *testing.T) {
	c := newCache(t, "", builderFunc(func(_ backend.BuildRequest) (backend.BuildResult, error) {
		return backend.BuildResult{Exit: backend.ExitStatus{ExitCode: -1, Signal: "SIGKILL", Killed: true}}, nil
	}), nil)
	req := request("x")
	req.Timeout = time.Second
	if _, err := c.Ensure(context.Background(), req); err == nil || !strings.Contains(err.Error(), "killed after its timeout of 1s") {
		t.Fatalf("%v", err)
	}
}

// A build's timeout is capped by the node's maximum, whatever the bundle
// asks (the API refuses more than an hour; an agent may allow less), and
// a build killed at the cap says which setting set it.
func TestTimeoutIsCapped(t *testing.T) {
	var seen []time.Duration
	opts := Options{Dir: filepath.Join(t.TempDir(), "faculties"), MaxTimeout: 5 * time.Minute,
		Builder: builderFunc(func(req backend.BuildRequest) (backend.BuildResult, error) {
			seen = append(seen, req.Timeout)
			return backend.BuildResult{Exit: backend.ExitStatus{ExitCode: -1, Signal: "SIGKILL", Killed: true}}, nil
		})}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, asked := range []time.Duration{time.Minute, 0, 2 * time.Hour} {
		req := request(fmt.Sprint("x", i))
		req.Timeout = asked
		_, err := c.Ensure(context.Background(), req)
		want := "killed after its timeout of 1m0s (spec.build.timeout)"
		if asked != time.Minute {
			want = "killed after 5m0s, this node's maximum build timeout (the agent's --faculty-max-build-timeout, chart value agent.facultyBuilder.maxTimeout), shorter than the "
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("asking %s: %v, want %q", asked, err, want)
		}
	}
	if fmt.Sprint(seen) != "[1m0s 5m0s 5m0s]" {
		t.Errorf("builds ran with timeouts %v, want the request's up to the cap", seen)
	}
	if d, err := New(Options{Dir: filepath.Join(t.TempDir(), "f")}); err != nil || d.opts.MaxTimeout != DefaultMaxTimeout {
		t.Errorf("default cap: %v, %v", d, err)
	}
}

// The caller of a build going away cancels it without poisoning the
// fingerprint: the next caller builds.
func TestCancelledBuildIsNotRemembered(t *testing.T) {
	var builds atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	c := newCache(t, "", builderFunc(func(req backend.BuildRequest) (backend.BuildResult, error) {
		if builds.Add(1) == 1 {
			cancel()
			return backend.BuildResult{}, context.Canceled
		}
		return copyBuild(req)
	}), nil)
	req := request("#!/bin/sh\n")
	if _, err := c.Ensure(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	if _, err := c.Ensure(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// Collect keeps each bundle's newest retainStale builds and every build in
// use, and removes the rest, and every unused build of a bundle gone.
func TestCollect(t *testing.T) {
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newCache(t, "", builderFunc(copyBuild), clk)
	var fps []string
	for i := range 4 {
		b, err := c.Ensure(context.Background(), request(fmt.Sprintf("#!/bin/sh\necho v%d\n", i)))
		if err != nil {
			t.Fatal(err)
		}
		fps = append(fps, b.Fingerprint)
		clk.Add(time.Minute)
	}
	other := request("#!/bin/sh\necho other\n")
	other.Bundle = "ns/gone"
	ob, err := c.Ensure(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	// v3 is current, v0 runs in a sandbox; one stale build is kept (v2).
	removed, err := c.Collect(map[string]bool{fps[3]: true, fps[0]: true}, map[string]int{"ns/hello": 1})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	want := []string{fps[1], ob.Fingerprint}
	sort.Strings(want)
	if fmt.Sprint(removed) != fmt.Sprint(want) {
		t.Fatalf("removed %v, want v1 and the gone bundle's %v", removed, want)
	}
	for i, fp := range fps {
		_, state, _ := c.Lookup(fp)
		if (state == Ready) != (i != 1) {
			t.Fatalf("v%d is %s", i, state)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
