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

package kubectlplugin

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/playground-dev/playground/internal/audit"
	"github.com/playground-dev/playground/internal/devconfig"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
)

// devKubeconfig writes a kubeconfig of the API server at server, with
// playground-dev's extension when ext is not nil, and returns its path.
func devKubeconfig(t *testing.T, server string, ext *devconfig.Extension) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "a-token"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	if ext != nil {
		if err := devconfig.Add(kc, *ext); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDevAgentOnlyOnLoopback: an agent without TLS is reached without
// --agent-cleartext only with playground-dev's kubeconfig, and only when
// the API server and the agent are both on this machine's loopback: a
// kubeconfig that carries playground-dev's extension for a remote cluster,
// or a Sandbox whose endpoint points off the machine, gets no token in
// clear.
func TestDevAgentOnlyOnLoopback(t *testing.T) {
	dev := &devconfig.Extension{MCPEndpoint: "http://127.0.0.1:7080/mcp"}
	for _, tc := range []struct {
		name, server, agent string
		ext                 *devconfig.Extension
		want                string // "" reached
	}{
		{"playground-dev", "https://127.0.0.1:40001", "http://127.0.0.1:40002", dev, ""},
		{"playground-dev on IPv6 loopback", "https://[::1]:40001", "http://[::1]:40002", dev, ""},
		{"a kubeconfig of another cluster", "https://127.0.0.1:40001", "http://127.0.0.1:40002", nil, "give --agent-cleartext"},
		{"the extension on a remote cluster", "https://192.0.2.10:6443", "http://127.0.0.1:40002", dev, "its API server https://192.0.2.10:6443 is not on this machine's loopback"},
		{"an agent off the machine", "https://127.0.0.1:40001", "http://192.0.2.11:8443", dev, "the agent http://192.0.2.11:8443 is not on this machine's loopback"},
		{"an agent named like loopback", "https://127.0.0.1:40001", "http://127.0.0.1.example.com:8443", dev, "not on this machine's loopback"},
		{"an agent by a name", "https://127.0.0.1:40001", "http://localhost:8443", dev, "not on this machine's loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := &cli{env: Env{}.withDefaults(), kubeconfig: devKubeconfig(t, tc.server, tc.ext)}
			cfg, err := x.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			ok, err := x.devAgent(cfg, clusterview.Identity{Namespace: "default", Name: "demo"}, tc.agent)
			switch {
			case tc.want == "" && (!ok || err != nil):
				t.Fatalf("not reached: %v", err)
			case tc.want != "" && (ok || err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("reached %v, error %v; want it refused with %q", ok, err, tc.want)
			}
		})
	}
}

// TestDevDefaults: with playground-dev's kubeconfig, audit finds its trail
// without --file, and the MCP endpoint is its gateway's.
func TestDevDefaults(t *testing.T) {
	t.Setenv(EndpointEnv, "")
	trailPath := filepath.Join(t.TempDir(), "audit.log")
	sink, err := audit.File(audit.FileOptions{Path: trailPath})
	if err != nil {
		t.Fatal(err)
	}
	trail := audit.New(audit.LevelRequest, "agent", sink)
	trail.Record(audit.Record{Tenant: "default/demo", Identity: "playground-admin", Tool: "exec", Command: "uname -a", Outcome: "ok"})
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	kubeconfig := devKubeconfig(t, "https://127.0.0.1:40001", &devconfig.Extension{MCPEndpoint: "http://127.0.0.1:7080/mcp", AuditLog: trailPath})
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--kubeconfig", kubeconfig, "audit", "demo"}, Env{Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("audit demo with playground-dev's kubeconfig: %d %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "uname -a") {
		t.Errorf("audit demo did not read playground-dev's trail:\n%s", out.String())
	}
	x := &cli{env: Env{}.withDefaults(), kubeconfig: kubeconfig}
	endpoint, note, err := x.mcpEndpoint(context.Background(), "")
	if err != nil || endpoint != "http://127.0.0.1:7080/mcp" || !strings.Contains(note, "playground-dev") {
		t.Errorf("the MCP endpoint with playground-dev's kubeconfig: %q (%s), %v", endpoint, note, err)
	}
}
