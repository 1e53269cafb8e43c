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

package mcpgateway_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// seen records what an agent was asked: the protocol version each request
// declared and whether it asked for a binary answer.
type seen struct {
	mu       sync.Mutex
	versions map[string]int
	binary   int
}

func (s *seen) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.versions[r.Header.Get(agentapi.VersionHeader)]++
		if strings.Contains(r.Header.Get("Accept"), "vnd.playground") {
			s.binary++
		}
		s.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (s *seen) snapshot() (map[string]int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := map[string]int{}
	for k, n := range s.versions {
		v[k] = n
	}
	return v, s.binary
}

// TestAgentProtocolVersions: the gateway speaks the agent protocol's one
// version to an agent that advertises it in its Lease, asking for the
// binary answers; an agent of another major version, or one that
// advertises none, is refused with a message that says so, and counted,
// before any call reaches it.
func TestAgentProtocolVersions(t *testing.T) {
	g := startGateway(t, mcpgateway.Options{})
	g.waitReady(t)
	metrics := serveMetrics(t)
	stdout := "line one\nline two\n"
	binaryOut := "\x00\x01\x02 control bytes \xff"

	// use runs every agent-bound tool once and checks what came back.
	use := func(t *testing.T, n *node, name string) {
		tn := newTenant(t, newNamespace(t), name, n)
		cs := connect(t, g.url, tn.token, nil)
		handle := openServed(t, cs)
		var ex tools.ExecOutput
		callOK(t, cs, "exec", map[string]any{"handle": handle, "command": "printf '" + strings.ReplaceAll(stdout, "\n", `\n`) + "'; printf '\\000\\001\\002 control bytes \\377' >&2"}, &ex)
		gotErr, err := base64.StdEncoding.DecodeString(ex.Stderr)
		if ex.Stdout != stdout || ex.StderrEncoding != "base64" || err != nil || string(gotErr) != binaryOut || ex.ExitCode != 0 {
			t.Fatalf("exec: %+v", ex)
		}
		var job tools.JobExecOutput
		callOK(t, cs, "job_exec", map[string]any{"handle": handle, "command": "seq 1 3; echo done >&2"}, &job)
		out, errOut, final := pollAll(t, cs, job.JobID, "")
		if string(out) != "1\n2\n3\n" || string(errOut) != "done\n" || final.State != "exited" {
			t.Fatalf("job: %q %q %+v", out, errOut, final)
		}
		callOK(t, cs, "write", map[string]any{"handle": handle, "path": "f.txt", "text": "kept"}, nil)
		if res := callOK(t, cs, "read", map[string]any{"handle": handle, "path": "f.txt"}, nil); resultText(res) != "kept" {
			t.Fatalf("read: %q", resultText(res))
		}
	}

	t.Run("current", func(t *testing.T) {
		rec := &seen{versions: map[string]int{}}
		n := startNodeWith(t, nodeOptions{leaseNS: "playground-system", protocol: agentapi.Current.String(), wrap: rec.wrap})
		use(t, n, "new-agent")
		versions, binary := rec.snapshot()
		if binary == 0 || len(versions) != 1 || versions[agentapi.Current.String()] == 0 {
			t.Fatalf("the current agent was asked for %d binary answers, in versions %v; want binary answers in %s", binary, versions, agentapi.Current)
		}
	})

	for _, tc := range []struct {
		name, advertised, label string
		says                    []string
	}{
		{"another major", "2.0", "2.x", []string{"agent protocol 2.0 is not spoken here", "speaks 1.x"}},
		{"none", "", "invalid", []string{"names no agent protocol version"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := scrapeCounter(t, metrics, "playground_gateway_agent_protocol_refusals_total", "agent_protocol", tc.label)
			rec := &seen{versions: map[string]int{}}
			n := startNodeWith(t, nodeOptions{leaseNS: "playground-system", protocol: tc.advertised, wrap: rec.wrap})
			tn := newTenant(t, newNamespace(t), "refused-agent-"+tc.label[:1], n)
			cs := connect(t, g.url, tn.token, nil)
			waitFor(t, "the gateway to see the agent's Lease", 10*time.Second, func() error {
				res := call(t, cs, "open_session", map[string]any{})
				if !res.IsError || !strings.Contains(resultText(res), tc.says[0]) {
					return fmt.Errorf("%w: %s", errNotYet, resultText(res))
				}
				return nil
			})
			callErr(t, cs, "open_session", map[string]any{}, append([]string{"unavailable:"}, append(tc.says, "tell the operator")...)...)
			if after := scrapeCounter(t, metrics, "playground_gateway_agent_protocol_refusals_total", "agent_protocol", tc.label); after < before+2 {
				t.Fatalf("refusals counted %v, then %v; want at least 2 more", before, after)
			}
			if versions, _ := rec.snapshot(); len(versions) != 0 {
				t.Fatalf("a call reached the agent that advertises %q: %v", tc.advertised, versions)
			}
		})
	}
}

// scrapeCounter reads one counter's value for a label's value (0 when the
// series does not exist yet).
func scrapeCounter(t *testing.T, url, name, label, value string) float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(get(t, url)))
	if err != nil {
		t.Fatal(err)
	}
	f := fams[name]
	if f == nil {
		return 0
	}
	if f.GetType() != dto.MetricType_COUNTER {
		t.Fatalf("%s is a %s, want a counter", name, f.GetType())
	}
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
