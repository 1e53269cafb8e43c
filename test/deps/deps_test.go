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

// Package deps holds the rules of which package may import which, checked
// against `go list -deps` (docs/architecture.md, "Packages").
package deps

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/playground-dev/playground"

// rule says that the packages matching from, and every package they import
// (tests apart), import none of notTo outside from, except what matches
// except. Patterns are go list's: "x/..." is x and every package below it.
// A pattern is a path of this module, unless its first element is a domain
// name: then it is a whole import path, of another module.
type rule struct {
	from   string
	notTo  []string
	except []string
	why    string
}

var rules = []rule{
	{from: "api/...", notTo: []string{"..."},
		why: "the API types are imported by everyone and import nothing of this module"},
	{from: "internal/...", notTo: []string{"controllers/...", "hostagent/...", "mcpgateway/..."},
		why: "internal/ is machinery the components share; it imports none of them (playground-dev composes them in cmd/playground-dev/devenv)"},
	{from: "controllers/...", notTo: []string{"hostagent/...", "mcpgateway/..."}, except: []string{"hostagent/agentapi", "hostagent/bounds", "hostagent/exitstatus"},
		why: "the manager talks to agents and gateways through the API server, but for the versioned agent protocol (hostagent/agentapi, with the leaves it imports): the delivery of brokered egress credentials and signing keys to the node that needs them"},
	{from: "hostagent/...", notTo: []string{"controllers/...", "mcpgateway/..."},
		why: "the agent talks to the manager through the API server and serves the gateway over its API"},
	{from: "mcpgateway/...", notTo: []string{"controllers/..."},
		why: "the gateway reads the API server's view, never the manager's"},
	{from: "mcpgateway/...", notTo: []string{"hostagent", "hostagent/jobs/...", "hostagent/backend/...", "hostagent/guest/...", "hostagent/guestapi/...", "hostagent/agentserver/...", "hostagent/nodeagent/..."},
		why: "the gateway speaks the versioned agent protocol (hostagent/agentapi), never the kernel, so that gateways and agents that roll out at different times keep one contract"},
	{from: "hostagent/guestapi/...", notTo: []string{"..."}, except: []string{"hostagent/bounds", "hostagent/filecall", "hostagent/exitstatus"},
		why: "the guest protocol is all that the agent and the guest binary share: it imports nothing of either side, nor of the rest of this module, but the bounds every side checks (hostagent/bounds), the vocabulary of a file call (hostagent/filecall) and how a command ended (hostagent/exitstatus), which import nothing"},
	{from: "hostagent/bounds", notTo: []string{"..."},
		why: "the bounds of a call are defined once for the gateway, the agent and the guest binary, so they import nothing of any of them"},
	{from: "hostagent/exitstatus", notTo: []string{"..."},
		why: "how a command ended is one shape for the guest binary, the guest protocol, the backends, the kernel and the agent API, so it imports nothing of any of them"},
	{from: "hostagent/filecall", notTo: []string{"..."},
		why: "the vocabulary of a file call is defined once for the guest protocol, the guest binary and the backend contract, so it imports nothing of any of them"},
	{from: "hostagent/regularfile", notTo: []string{"..."},
		why: "opening a regular file without following a link is done the same way by the guest binary and the agent, so it imports nothing of either"},
	{from: "hostagent/duplex", notTo: []string{"..."},
		why: "relaying two connections into each other, half-closes included, is done the same way by the guest binary and the agent, so it imports nothing of either"},
	{from: "hostagent/guest/...", notTo: []string{"..."}, except: []string{"hostagent/guestapi/...", "hostagent/bounds", "hostagent/filecall", "hostagent/exitstatus", "hostagent/regularfile", "hostagent/duplex"},
		why: "the guest binary runs in every sandbox and links of this module the guest protocol, the bounds every side checks, the vocabulary of a file call, how a command ended and the leaves it shares with the agent (hostagent/regularfile, hostagent/duplex) only: no backend, job manager or kernel of the agent"},
	{from: "hostagent", notTo: []string{"hostagent/guest/..."}, why: hostWhy},
	{from: "hostagent/jobs/...", notTo: []string{"hostagent/guest/..."}, why: hostWhy},
	{from: "hostagent/backend/...", notTo: []string{"hostagent/guest/..."}, why: hostWhy},
	{from: "hostagent/backend/...", notTo: []string{"hostagent", "hostagent/jobs/...", "hostagent/agentserver/...", "hostagent/nodeagent/...", "hostagent/conformance/..."}, except: []string{"hostagent/jobs/heldjob"},
		why: "a backend is below the kernel (package hostagent), its job engine and the agent's server: it serves them through backend.Backend and imports none of them, nor the conformance suite that drives a backend through the kernel (tests apart); it may use the agent protocol's types (hostagent/agentapi, which imports nothing of the agent), as a command is one type from the gateway to the backend, and the job engine's values of a held job (hostagent/jobs/heldjob, which imports only the backend contract), which the guest's client (guestexec) turns into the guest protocol's"},
	{from: "hostagent/jobs/...", notTo: []string{"hostagent/backend/..."}, except: []string{"hostagent/backend"},
		why: "the job engine reaches a held job through its Held connection and the backend contract (hostagent/backend), never through a backend or the guest's client (guestexec), which import the engine's values of a held job (hostagent/jobs/heldjob) to implement Held"},
	{from: "hostagent/nodeagent/...", notTo: []string{"hostagent/guest/..."}, why: hostWhy},
	{from: "cmd/playground", notTo: []string{"hostagent/guest/..."}, why: hostWhy},
	{from: "cmd/playground", notTo: testLibraries, why: shippedWhy},
	{from: "cmd/playground-sandbox", notTo: testLibraries, why: shippedWhy},
	{from: "cmd/kubectl-playground", notTo: testLibraries, why: shippedWhy},
	{from: "cmd/playground-example-worker", notTo: testLibraries, why: shippedWhy},
	{from: "cmd/playground", notTo: []string{"sigs.k8s.io/controller-runtime/pkg/envtest/..."},
		why: "the components' binary, which the image ships to every node's privileged agent, links no test control plane (its package init writes to the file system); playground-dev (cmd/playground-dev) runs one"},
}

// testLibraries are this module's packages that only tests import: test
// doubles, fixtures, the backends' conformance suite, and the test tree.
// Their paths say so (an element ending in "test"), but for the conformance
// suite's, named here; TestTestLibrariesListed keeps this list whole.
var testLibraries = []string{
	"test/...",
	"hostagent/backend/backendtest/...",
	"hostagent/conformance/...",
	"hostagent/backend/oci/ocitest",
	"hostagent/agentserver/agentservertest",
	"internal/netnstest",
	"internal/rbactest",
	"internal/registrytest",
	"internal/s3test",
	"internal/sysctltest",
}

// hostWhy is the reason of the rules that keep the guest's code out of the
// agent: the agent runs the guest binary in a sandbox and speaks to it over
// the protocol (hostagent/guestapi, its client hostagent/backend/guestexec).
const hostWhy = "the agent speaks the guest protocol (hostagent/guestapi) to the guest binary, never links the guest's code, so that what runs in a sandbox and what runs on the node meet only on the wire"

// shippedWhy is the reason of the rules for the binaries the image carries
// (Dockerfile).
const shippedWhy = "test libraries are for tests: a binary that runs in a cluster or on a node carries no test double or suite"

// TestDependencyRules checks every rule against the module's import graph.
func TestDependencyRules(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list the imports: %v", err)
	}
	for _, r := range rules {
		t.Run(r.from, func(t *testing.T) {
			graph, roots := list(t, r.from)
			if len(roots) == 0 {
				t.Fatalf("%s matches no package", r.from)
			}
			for _, chain := range r.violations(graph, roots) {
				t.Errorf("%s imports %s (%s): %s", short(chain[0]), short(chain[len(chain)-1]), r.why, strings.Join(shortAll(chain), " → "))
			}
		})
	}
}

// violations returns, for each package the rule forbids that the roots
// import, one shortest chain of imports from a root to it.
func (r rule) violations(graph map[string][]string, roots []string) [][]string {
	var found [][]string
	for _, bad := range r.notTo {
		forbidden := func(p string) bool {
			return matches(bad, p) && !matches(r.from, p) &&
				!slices.ContainsFunc(r.except, func(pattern string) bool { return matches(pattern, p) })
		}
		found = append(found, paths(graph, roots, forbidden)...)
	}
	return found
}

// TestRulesCatch checks the rules on import graphs made up to break them,
// so that a rule that matches nothing (a pattern mistyped, an exception
// too wide) fails here rather than pass for ever.
func TestRulesCatch(t *testing.T) {
	m := func(p string) string { return module + "/" + p }
	for _, tc := range []struct {
		from  string
		graph map[string][]string
		want  []string // the packages reported, short
	}{
		{"hostagent/guestapi/...", map[string][]string{
			m("hostagent/guestapi"):         {m("hostagent/backend"), "encoding/json"},
			m("hostagent/guestapi/outring"): {m("hostagent/guestapi")},
		}, []string{"hostagent/backend"}},
		{"hostagent/guest/...", map[string][]string{
			m("hostagent/guest"):             {m("hostagent/guestapi"), m("hostagent/guestapi/mux"), m("hostagent/jobs")},
			m("hostagent/guest/x"):           {m("hostagent/backend/guestexec"), m("internal/budget")},
			m("hostagent/guestapi/mux"):      nil,
			m("hostagent/backend/guestexec"): nil,
		}, []string{"hostagent/backend/guestexec", "hostagent/jobs", "internal/budget"}},
		{"hostagent/guest/...", map[string][]string{
			m("hostagent/guest"): {m("hostagent/guestapi"), m("hostagent/guestapi/outring"), m("hostagent/regularfile"), m("hostagent/duplex"), "golang.org/x/sys/unix"},
		}, nil},
		{"hostagent", map[string][]string{
			m("hostagent"):      {m("hostagent/jobs")},
			m("hostagent/jobs"): {m("hostagent/guest")},
		}, []string{"hostagent/guest"}},
		{"hostagent/backend/...", map[string][]string{
			m("hostagent/backend/vm"): {m("hostagent/guest/mux"), m("hostagent/guestapi")},
		}, []string{"hostagent/guest/mux"}},
		{"hostagent/backend/...", map[string][]string{
			m("hostagent/backend/backendtest/suite"): {m("hostagent"), m("hostagent/backend")},
			m("hostagent/backend/oci"):               {m("hostagent/backend/guestexec"), m("hostagent/egressbroker")},
			m("hostagent/backend/guestexec"):         {m("hostagent/jobs")},
			m("hostagent"):                           {m("hostagent/backend")},
		}, []string{"hostagent", "hostagent/jobs"}},
		{"hostagent/backend/...", map[string][]string{
			m("hostagent/backend/oci"):       {m("hostagent/backend/guestexec")},
			m("hostagent/backend/guestexec"): {m("hostagent/jobs/heldjob"), m("hostagent/backend")},
			m("hostagent/jobs/heldjob"):      {m("hostagent/backend")},
		}, nil},
		{"hostagent/jobs/...", map[string][]string{
			m("hostagent/jobs"):         {m("hostagent/jobs/heldjob"), m("hostagent/backend"), m("hostagent/backend/guestexec")},
			m("hostagent/jobs/heldjob"): {m("hostagent/backend")},
		}, []string{"hostagent/backend/guestexec"}},
	} {
		var roots []string
		for p := range tc.graph {
			if matches(tc.from, p) {
				roots = append(roots, p)
			}
		}
		slices.Sort(roots)
		var got []string
		for _, r := range rules {
			if r.from != tc.from {
				continue
			}
			for _, chain := range r.violations(tc.graph, roots) {
				got = append(got, short(chain[len(chain)-1]))
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("the rules from %s report %q in %v, want %q", tc.from, got, tc.graph, tc.want)
		}
	}
}

// TestTestLibrariesListed checks that every package of this module whose
// path marks it a test library is in testLibraries, so that the rules for
// the shipped binaries cover it.
func TestTestLibrariesListed(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	_, pkgs := list(t, "...")
	found := 0
	for _, p := range pkgs {
		if !isTestLibrary(short(p)) {
			continue
		}
		found++
		if !slices.ContainsFunc(testLibraries, func(pattern string) bool { return matches(pattern, p) }) {
			t.Errorf("%s is a test library by its path but not in testLibraries: add it, so that no shipped binary links it", short(p))
		}
	}
	if found == 0 {
		t.Error("no package of this module looks like a test library: isTestLibrary no longer sees them")
	}
}

// isTestLibrary reports whether a package path (of this module, short)
// marks a test library: an element that ends in "test" (fstest's
// convention) or is "testing" (Kubernetes's), the package or one above it.
func isTestLibrary(path string) bool {
	for _, e := range strings.Split(path, "/") {
		if strings.HasSuffix(e, "test") || e == "testing" {
			return true
		}
	}
	return false
}

// TestMatches pins the pattern semantics the rules rely on.
func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, path string
		want          bool
	}{
		{"hostagent", module + "/hostagent", true},
		{"hostagent", module + "/hostagent/jobs", false},
		{"hostagent/jobs/...", module + "/hostagent/jobs", true},
		{"hostagent/backend/...", module + "/hostagent/backend/oci", true},
		{"hostagent/...", module + "/hostagentx", false},
		{"...", module + "/internal/budget", true},
		{"...", "k8s.io/api/core/v1", false},
		{"sigs.k8s.io/controller-runtime/pkg/envtest/...", "sigs.k8s.io/controller-runtime/pkg/envtest", true},
		{"sigs.k8s.io/controller-runtime/pkg/envtest/...", "sigs.k8s.io/controller-runtime/pkg/envtest/komega", true},
		{"sigs.k8s.io/controller-runtime/pkg/envtest/...", "sigs.k8s.io/controller-runtime/pkg/client", false},
		{"sigs.k8s.io/controller-runtime/pkg/envtest", module + "/sigs.k8s.io/controller-runtime/pkg/envtest", false},
	} {
		if got := matches(tc.pattern, tc.path); got != tc.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
}

// list returns the import graph of the packages matching pattern (a path
// of this module) and of all their dependencies, and the matching packages.
func list(t *testing.T, pattern string) (graph map[string][]string, roots []string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,DepOnly", module+"/"+pattern)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pattern, err, stderr.String())
	}
	graph = map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			DepOnly    bool
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list %s: %v", pattern, err)
		}
		graph[p.ImportPath] = p.Imports
		if !p.DepOnly {
			roots = append(roots, p.ImportPath)
		}
	}
	return graph, roots
}

// paths returns, for each package that bad matches and that the roots
// import, one shortest chain of imports from a root to it.
func paths(graph map[string][]string, roots []string, bad func(string) bool) [][]string {
	prev := map[string]string{}
	queue := slices.Clone(roots)
	for _, r := range roots {
		prev[r] = ""
	}
	var found [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if bad(p) {
			var chain []string
			for q := p; q != ""; q = prev[q] {
				chain = append([]string{q}, chain...)
			}
			found = append(found, chain)
			continue // what it imports in turn is its own rule's business
		}
		for _, q := range graph[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return found
}

// matches reports whether path is in pattern, in go list's syntax: a path
// of this module, or a whole import path when its first element is a
// domain name.
func matches(pattern, path string) bool {
	if first, _, _ := strings.Cut(pattern, "/"); strings.Contains(first, ".") && !strings.HasPrefix(first, ".") {
		if base, ok := strings.CutSuffix(pattern, "/..."); ok {
			return path == base || strings.HasPrefix(path, base+"/")
		}
		return path == pattern
	}
	if pattern == "..." {
		return strings.HasPrefix(path, module+"/")
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == module+"/"+base || strings.HasPrefix(path, module+"/"+base+"/")
	}
	return path == module+"/"+pattern
}

func short(p string) string { return strings.TrimPrefix(p, module+"/") }

func shortAll(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = short(p)
	}
	return out
}
