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

// Package manifests tests the deployment manifests: the kustomize tree under
// config/ and the Helm chart under charts/playground. Both are rendered with
// real tools (the control plane's kubectl for kustomize, helm built from the
// Go module proxy by hack/helm.sh), compared with each other and with a
// table of the expected objects, checked for what the components need
// (the agent's privileges, the shared token, the NetworkPolicy, flags that
// the binary accepts), and applied to a real kube-apiserver with the CRDs
// installed, with server-side dry-run.
package manifests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/testbin"
)

const (
	// namespace is where config/default and the chart (in these tests)
	// install Playground.
	namespace = "playground-system"
	// release is the Helm release name; with it the chart's object names
	// are the kustomize tree's.
	release = "playground"
)

// setup is what the tests share: tools and renderings, each made once.
var setup struct {
	rootOnce sync.Once
	root     string
	rootErr  error

	assetsOnce sync.Once
	assets     string // kube-apiserver, etcd, kubectl
	assetsErr  error

	helmOnce sync.Once
	helm     string
	helmErr  error

	mu         sync.Mutex
	renderings map[string]rendering

	binOnce sync.Once
	bin     string // the playground binary
	binErr  error

	cpOnce     sync.Once
	cp         *controlplane.ControlPlane
	kubeconfig string
	cpErr      error
}

// rendering is one rendered manifest stream, raw and decoded.
type rendering struct {
	raw  []byte
	objs []*unstructured.Unstructured
}

func TestMain(m *testing.M) {
	var err error
	if helmHome, err = os.MkdirTemp("", "playground-manifests-helm-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(helmHome)
	if setup.cp != nil {
		if err := setup.cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}
	if setup.kubeconfig != "" {
		os.RemoveAll(filepath.Dir(setup.kubeconfig))
	}
	os.Exit(code)
}

func repoRoot(t *testing.T) string {
	t.Helper()
	setup.rootOnce.Do(func() { setup.root, setup.rootErr = controlplane.ModuleRoot() })
	if setup.rootErr != nil {
		t.Fatal(setup.rootErr)
	}
	return setup.root
}

func kubectl(t *testing.T) string {
	t.Helper()
	setup.assetsOnce.Do(func() { setup.assets, setup.assetsErr = controlplane.Assets() })
	if setup.assetsErr != nil {
		t.Fatalf("building or finding the control plane (hack/controlplane.sh): %v", setup.assetsErr)
	}
	return filepath.Join(setup.assets, "kubectl")
}

// helm returns the helm binary that hack/helm.sh builds from the Go module
// proxy. A failure to build it fails the test: the chart is never skipped.
func helm(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	setup.helmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "helm.sh"))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			setup.helmErr = fmt.Errorf("%w\n%s", err, stderr.String())
			return
		}
		setup.helm = strings.TrimSpace(string(out))
	})
	if setup.helmErr != nil {
		t.Fatalf("could not build helm from the Go module proxy with hack/helm.sh, so the chart cannot be rendered: %v", setup.helmErr)
	}
	return setup.helm
}

// run runs a command and returns its stdout; a failure fails the test with
// the command's stderr.
func run(t *testing.T, stdin []byte, env []string, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// render returns a named rendering, made once per test binary.
func render(t *testing.T, name string, produce func() []byte) rendering {
	t.Helper()
	setup.mu.Lock()
	defer setup.mu.Unlock()
	if r, ok := setup.renderings[name]; ok {
		return r
	}
	raw := produce()
	objs, err := decode(raw)
	if err != nil {
		t.Fatalf("decoding the %s rendering: %v", name, err)
	}
	if setup.renderings == nil {
		setup.renderings = map[string]rendering{}
	}
	r := rendering{raw: raw, objs: objs}
	setup.renderings[name] = r
	return r
}

// renderKustomize is `kubectl kustomize config/default`.
func renderKustomize(t *testing.T) rendering {
	return render(t, "kustomize", func() []byte {
		return run(t, nil, nil, kubectl(t), "kustomize", filepath.Join(repoRoot(t), "config", "default"))
	})
}

// helmHome holds helm's configuration, cache and data, out of the user's
// home; TestMain removes it.
var helmHome string

// helmEnv points helm at helmHome.
func helmEnv(t *testing.T) []string {
	t.Helper()
	if helmHome == "" {
		t.Fatal("TestMain made no helm home")
	}
	dir := helmHome
	return []string{
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data"),
	}
}

// renderHelm is `helm template` of the chart with the CRDs, in namespace
// playground-system, with extra flags (--set ...) for variants.
func renderHelm(t *testing.T, name string, flags ...string) rendering {
	return render(t, name, func() []byte {
		args := append([]string{"template", release, filepath.Join(repoRoot(t), "charts", "playground"),
			"--namespace", namespace, "--include-crds"}, flags...)
		return run(t, nil, helmEnv(t), helm(t), args...)
	})
}

// servesAdmissionPolicies tells `helm template` what `helm install` learns
// from a cluster of Kubernetes 1.36 or later: it serves
// MutatingAdmissionPolicy.
var servesAdmissionPolicies = []string{"--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"}

// renderHelmDefault is the chart with its default values, for a current
// cluster.
func renderHelmDefault(t *testing.T) rendering {
	return renderHelm(t, "helm", servesAdmissionPolicies...)
}

// customHelmValues exercise the values that change names, namespaces and
// optional objects.
var customHelmValues = []string{
	"--namespace", "playground-apps",
	"--set", "gateway.service.type=NodePort",
	"--set", "gateway.service.nodePort=30080",
	"--set", "gateway.namespace=team-a",
	"--set", "gateway.pdb.enabled=false",
	"--set", "gateway.sessionKey.create=false",
	"--set", "agent.metricsPort=0",
	"--set", "agent.nodeLabels.disk=ssd",
	"--set", "agent.nodeLabels.zone=a",
	"--set", "agent.priorityClassName=system-node-critical",
	"--set", "agent.network=egress",
	"--set", "agent.egressDeny={10.244.0.0/16,10.96.0.0/12}",
	"--set", "agent.faculties.hostPathPrefixes={/opt/playground/faculties/,/srv/tools}",
	"--set", "manager.extraArgs={-v=2}",
	"--set", "image.tag=v9.9.9",
	"--set", "admissionPolicies.enabled=false",
	"--set", "audit.level=Request",
	"--set", "audit.webhookURL=https://audit.example/records",
	"--set", "tracing.endpoint=http://otel-collector.observability:4318",
	"--set", "tracing.sampleRatio=0.25",
	"--set", "dashboard.configMap.enabled=true",
}

func renderHelmCustom(t *testing.T) rendering {
	return renderHelm(t, "helm (custom values)", append(slices.Clone(servesAdmissionPolicies), customHelmValues...)...)
}

func renderHelmLeaseNamespace(t *testing.T) rendering {
	return renderHelm(t, "helm (lease namespace elsewhere)", append(slices.Clone(servesAdmissionPolicies), "--set", "leaseNamespace=elsewhere")...)
}

// decode reads a multi-document YAML stream into objects, numbers as int64
// as the API machinery has them.
func decode(raw []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", i, err, doc)
		}
		objs = append(objs, obj)
	}
}

// key names an object as kind/namespace/name (namespace empty when
// cluster-scoped).
func key(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func keys(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, key(o))
	}
	sort.Strings(ks)
	return ks
}

func find(t *testing.T, r rendering, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendering; it has %v", kind, name, keys(r.objs))
	return nil
}

// playgroundBinary builds cmd/playground, to check the rendered flags
// against the real flag sets.
func playgroundBinary(t *testing.T) string {
	t.Helper()
	setup.binOnce.Do(func() { setup.bin, setup.binErr = testbin.Build("github.com/playground-dev/playground/cmd/playground") })
	if setup.binErr != nil {
		t.Fatal(setup.binErr)
	}
	return setup.bin
}

// apiServer starts kube-apiserver and etcd with the CRDs once (and without
// the admission policies, which the renderings install), and returns an
// administrator's kubeconfig.
func apiServer(t *testing.T) string {
	t.Helper()
	kubectl(t) // builds or finds the assets
	setup.cpOnce.Do(func() {
		cp, err := controlplane.Start(controlplane.Options{AssetsDir: setup.assets, NoAdmissionPolicies: true})
		if err != nil {
			setup.cpErr = err
			return
		}
		setup.cp = cp
		dir, err := os.MkdirTemp("", "playground-manifests-")
		if err != nil {
			setup.cpErr = err
			return
		}
		setup.kubeconfig = filepath.Join(dir, "kubeconfig")
		setup.cpErr = cp.WriteKubeconfig(setup.kubeconfig)
	})
	if setup.cpErr != nil {
		t.Fatalf("starting the control plane: %v", setup.cpErr)
	}
	return setup.kubeconfig
}
