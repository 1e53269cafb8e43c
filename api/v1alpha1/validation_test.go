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

package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/manifest"
)

// newNamespace creates a namespace for one test, so tests never see each
// other's objects.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// decode reads one object written in YAML.
func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatalf("decoding %q: %v", doc, err)
	}
	return obj
}

// readSamples returns every object of config/samples.
func readSamples(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.ReadKustomization(filepath.Join(root, "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestSamplesAreAccepted: every object of config/samples, and every
// Playground object of examples/, is accepted as it is, with strict field
// validation: a sample that names a field the API no longer has (one
// moved, as the pile's settings were into spec.pile) is refused rather
// than its setting silently dropped.
func TestSamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	kinds := map[string]bool{}
	strict := client.FieldValidation(metav1.FieldValidationStrict)
	for _, obj := range readSamples(t) {
		obj.SetNamespace(ns)
		g.Expect(k8s.Create(context.Background(), obj, strict)).To(Succeed(), "sample %s/%s", obj.GetKind(), obj.GetName())
		kinds[obj.GetKind()] = true
	}
	g.Expect(kinds).To(HaveKey("Tenant"))
	g.Expect(kinds).To(HaveKey("WorkerMapping"))
	g.Expect(kinds).To(HaveKey("FacultyBundle"))

	root, err := controlplane.ModuleRoot()
	g.Expect(err).NotTo(HaveOccurred())
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).NotTo(BeEmpty())
	for _, f := range files {
		r, err := os.Open(f)
		g.Expect(err).NotTo(HaveOccurred())
		objs, err := manifest.Decode(f, r)
		r.Close()
		g.Expect(err).NotTo(HaveOccurred())
		for _, obj := range objs {
			if obj.GroupVersionKind().Group != playgroundv1alpha1.GroupVersion.Group {
				continue
			}
			if obj.GetKind() != "TenantPolicy" {
				obj.SetNamespace(ns)
			}
			g.Expect(k8s.Create(context.Background(), obj, strict, client.DryRunAll)).To(Succeed(), "%s: %s/%s", filepath.Base(f), obj.GetKind(), obj.GetName())
		}
	}
}

// TestInvalidSpecsAreRefused holds the API's admission rules: each spec is
// refused by the API server with the message its validation writes.
func TestInvalidSpecsAreRefused(t *testing.T) {
	const (
		tenant = "apiVersion: playground.dev/v1alpha1\nkind: Tenant\nmetadata: {name: t}\n"
		sbx    = "apiVersion: playground.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: s}\n"
		wm     = "apiVersion: playground.dev/v1alpha1\nkind: WorkerMapping\nmetadata: {name: w}\n"
		fb     = "apiVersion: playground.dev/v1alpha1\nkind: FacultyBundle\nmetadata: {name: f}\n"
		snap   = "apiVersion: playground.dev/v1alpha1\nkind: SandboxSnapshot\nmetadata: {name: s}\n"
		cmSrc  = "  source: {configMap: {name: tools}}\n"
	)
	cases := []struct {
		name, doc, want string
	}{
		{"unknown catalog", tenant + "spec: {catalog: both}", `spec.catalog: Unsupported value: "both"`},
		{"snapshot of no sandbox", snap + "spec: {}", "spec.sandboxRef: Required value"},
		{"snapshot kept a moment", snap + "spec: {sandboxRef: {name: s}, expireAfter: 5s}", "expireAfter must be at least 1m"},
		{"fork of a bad name", tenant + "spec: {sandbox: {fromSnapshot: Not_A_Name}}", "fromSnapshot must be a SandboxSnapshot's name: lower-case letters, digits"},
		{"unknown backend", tenant + "spec: {sandbox: {backend: docker}}", `spec.sandbox.backend: Unsupported value: "docker"`},
		{"unknown isolation", tenant + "spec: {sandbox: {isolation: kata}}", `spec.sandbox.isolation: Unsupported value: "kata"`},
		{"isolation of a jail", tenant + "spec: {sandbox: {backend: jail, isolation: gvisor}}", "isolation is a choice of backend oci: other backends take none"},
		{"isolation of a sandbox on lima", sbx + "spec: {tenantRef: {name: t}, backend: lima, isolation: container}", "isolation is a choice of backend oci: other backends take none"},
		{"too few pids", tenant + "spec: {sandbox: {resources: {pids: 1}}}", "spec.sandbox.resources.pids: Invalid value: 1: spec.sandbox.resources.pids in body should be greater than or equal to 16"},
		{"unknown reclaim policy", tenant + "spec: {pile: {reclaimPolicy: Recycle}}", `spec.pile.reclaimPolicy: Unsupported value: "Recycle"`},
		{"unknown reclaim policy of a sandbox", sbx + "spec: {tenantRef: {name: t}, pile: {reclaimPolicy: Recycle}}", `spec.pile.reclaimPolicy: Unsupported value: "Recycle"`},
		{"bad env name", tenant + "spec: {sandbox: {loginProfile: {env: [{name: 1BAD, value: x}]}}}", "name must be a shell variable's name: letters, digits and underscores"},
		{"duplicate env", tenant + "spec: {sandbox: {loginProfile: {env: [{name: A}, {name: A}]}}}", `spec.sandbox.loginProfile.env[1]: Duplicate value: {"name":"A"}`},
		{"duplicate faculty", tenant + "spec: {sandbox: {faculties: [{name: a}, {name: a}]}}", "spec.sandbox.faculties[1]: Duplicate value"},
		{"bad persona", tenant + "spec: {persona: '-x'}", "persona must start with a letter or digit"},
		{"rotation request too long", tenant + "spec: {credentials: {rotationRequest: " + strings.Repeat("x", 64) + "}}", "spec.credentials.rotationRequest: Too long: may not be more than 63 bytes"},
		{"too few inodes", tenant + "spec: {sandbox: {storage: {inodes: 10}}}", "spec.sandbox.storage.inodes in body should be greater than or equal to 256"},
		{"too few pile inodes", tenant + "spec: {pile: {inodes: 10}}", "spec.pile.inodes in body should be greater than or equal to 256"},
		{"a shared pile that is a faculty too", tenant + "spec: {pile: {shared: {name: a}}, sandbox: {faculties: [{name: a}]}}", "a FacultyBundle is either a faculty or the shared pile, not both"},
		{"a sandbox's shared pile that is a faculty too", sbx + "spec: {tenantRef: {name: t}, pile: {shared: {name: a}}, faculties: [{name: a}]}", "a FacultyBundle is either a faculty or the shared pile, not both"},
		{"sandbox without tenant", sbx + "spec: {}", "spec.tenantRef: Required value"},
		{"sandbox node name not a DNS name", sbx + "spec: {tenantRef: {name: t}, nodeName: Node_A}", "nodeName must be a node's name"},
		{"two worker destinations", wm + "spec: {tenantRef: {name: t}, destination: {service: {name: s, port: 80}, sandbox: {command: [w], port: 8080}}}", "set exactly one destination: service or sandbox"},
		{"no worker destination", wm + "spec: {tenantRef: {name: t}, destination: {}}", "set exactly one destination: service or sandbox"},
		{"service port zero", wm + "spec: {tenantRef: {name: t}, destination: {service: {name: s, port: 0}}}", "spec.destination.service.port in body should be greater than or equal to 1"},
		{"privileged sandbox worker port", wm + "spec: {tenantRef: {name: t}, destination: {sandbox: {command: [w], port: 80}}}", "spec.destination.sandbox.port in body should be greater than or equal to 1024"},
		{"worker without command", wm + "spec: {tenantRef: {name: t}, destination: {sandbox: {command: [], port: 8080}}}", "spec.destination.sandbox.command in body should have at least 1 items"},
		{"relative worker path", wm + "spec: {tenantRef: {name: t}, destination: {service: {name: s, port: 80, path: mcp}}}", "path must be an HTTP path starting with /, such as /mcp"},
		{"binary is a path", fb + "spec:\n" + cmSrc + "  binaries: [bin/tool]", "binaries must be plain file names"},
		{"binary is dot-dot", fb + "spec:\n" + cmSrc + "  binaries: ['..']", "binaries must be plain file names"},
		{"no binaries", fb + "spec:\n" + cmSrc + "  binaries: []", "spec.binaries in body should have at least 1 items"},
		{"duplicate binaries", fb + "spec:\n" + cmSrc + "  binaries: [a, a]", `spec.binaries[1]: Duplicate value: "a"`},
		{"two bundle sources", fb + "spec: {source: {configMap: {name: c}, hostPath: {path: /opt/t}}, binaries: [a]}", "set exactly one source: configMap or hostPath"},
		{"relative host path", fb + "spec: {source: {hostPath: {path: opt/t}}, binaries: [a]}", "path must be absolute: a directory of the node, starting with /"},
		{"empty build command", fb + "spec:\n" + cmSrc + "  binaries: [a]\n  build: {command: []}", "spec.build.command in body should have at least 1 items"},
		{"host path with ..", fb + "spec: {source: {hostPath: {path: /opt/tools/../../etc}}, binaries: [a]}", "path must not have '.' or '..' elements"},
		{"host path with .", fb + "spec: {source: {hostPath: {path: /opt/./tools}}, binaries: [a]}", "path must not have '.' or '..' elements"},
		{"build timeout past an hour", fb + "spec:\n" + cmSrc + "  binaries: [a]\n  build: {command: [make], timeout: 61m}", "timeout must be a positive duration of at most 1h"},
		{"build timeout of days", fb + "spec:\n" + cmSrc + "  binaries: [a]\n  build: {command: [make], timeout: 8760h}", "timeout must be a positive duration of at most 1h"},
		{"zero build timeout", fb + "spec:\n" + cmSrc + "  binaries: [a]\n  build: {command: [make], timeout: 0s}", "timeout must be a positive duration of at most 1h"},
		{"unknown network mode", tenant + "spec: {sandbox: {network: {mode: host}}}", `spec.sandbox.network.mode: Unsupported value: "host"`},
		{"egress without a list", tenant + "spec: {sandbox: {network: {mode: egress}}}", "egress lists what mode egress may reach"},
		{"a list without egress", tenant + "spec: {sandbox: {network: {egress: [{cidr: 10.0.0.0/8}]}}}", "egress lists what mode egress may reach"},
		{"egress cidr not a network", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.1/8}]}}}", "cidr must be a network address"},
		{"egress cidr an address", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.1}]}}}", "cidr must be a network address"},
		{"egress IPv6 cidr not a network", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 'fd00::1/8'}]}}}", "cidr must be a network address"},
		{"egress port zero", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.0/8, ports: [0]}]}}}", "should be greater than or equal to 1"},
		{"egress port too high", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.0/8, ports: [65536]}]}}}", "should be less than or equal to 65535"},
		{"egress rule with cidr and host", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.0/8, host: pypi.org}]}}}", "give exactly one of cidr"},
		{"egress rule with neither", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{ports: [443]}]}}}", "give exactly one of cidr"},
		{"egress host upper case", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: PyPI.org}]}}}", "host must be a DNS name in lower case, such as pypi.org"},
		{"egress host wildcard inside", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: 'a.*.org'}]}}}", "host must be a DNS name in lower case"},
		{"egress host a URL", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: 'https://PyPI.org'}]}}}", "host must be a DNS name in lower case, such as pypi.org, or a wildcard such as *.example.com for the names under a domain: no scheme (https://), port, path or capitals"},
		{"server name checked without ports", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: api.test, checkServerName: true}]}}}", "checkServerName checks TLS connections"},
		{"server name checked of a cidr", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.0/8, ports: [443], checkServerName: true}]}}}", "checkServerName checks TLS connections"},
		{"credential for a wildcard", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: '*.api.test', ports: [443], credential: {secretRef: {name: k}}}]}}}", "a credential is added to HTTPS requests to one host"},
		{"credential without ports", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: api.test, credential: {secretRef: {name: k}}}]}}}", "a credential is added to HTTPS requests to one host"},
		{"credential of a cidr", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.0/8, ports: [443], credential: {secretRef: {name: k}}}]}}}", "a credential is added to HTTPS requests to one host"},
		{"credential in the Host header", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: api.test, ports: [443], credential: {header: HOST, secretRef: {name: k}}}]}}}", "the Host header names the server"},
		{"credential header with a space", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: api.test, ports: [443], credential: {header: 'X Key', secretRef: {name: k}}}]}}}", "header must be an HTTP header's name, such as Authorization"},
		// Quantities a node would refuse: each message names the minimum.
		// Quantities not written as quantities: a sentence, not the
		// Quantity type's regular expression.
		{"memory in gigabits", tenant + "spec: {sandbox: {resources: {memory: 1Gb}}}", "spec.sandbox.resources.memory: Invalid value: \"1Gb\": memory must be a quantity of bytes, such as 512Mi or 2Gi (Ki, Mi, Gi count in 1024s; k, M, G in 1000s; 1Gb and 1GiB are not quantities)"},
		{"memory in GiB", sbx + "spec: {tenantRef: {name: t}, resources: {memory: 2GiB}}", "memory must be a quantity of bytes"},
		{"memory a word", tenant + "spec: {sandbox: {resources: {memory: lots}}}", "memory must be a quantity of bytes"},
		{"memory a boolean", tenant + "spec: {sandbox: {resources: {memory: true}}}", "spec.sandbox.resources.memory in body must be of type integer,string"},
		{"cpu in cores", tenant + "spec: {sandbox: {resources: {cpu: 2cores}}}", "cpu must be a quantity of cores, such as 500m or 2"},
		{"storage in gigabytes", tenant + "spec: {sandbox: {storage: {size: 4GB}}}", "size must be a quantity of bytes, such as 512Mi or 4Gi"},
		{"pile in megabytes", tenant + "spec: {pile: {size: 512MB}}", "pile size must be a quantity of bytes"},
		{"secret key with a slash", tenant + "spec: {sandbox: {network: {mode: egress, egress: [{host: api.test, ports: [443], credential: {secretRef: {name: k, key: a/b}}}]}}}", "key must be a key of a Secret's data"},
		{"worker path relative", wm + "spec: {tenantRef: {name: t}, destination: {sandbox: {command: [w], port: 8080, path: mcp}}}", "path must be an HTTP path starting with /"},
		{"sandbox persona", sbx + "spec: {tenantRef: {name: t}, persona: ' x'}", "persona must start with a letter or digit"},
		{"key fingerprint", sbx + "spec: {tenantRef: {name: t}, pile: {signingKey: {secretName: k, fingerprint: XYZ}}}", "fingerprint must be 16 lower-case hexadecimal digits"},
		{"negative memory", tenant + "spec: {sandbox: {resources: {memory: -1Gi}}}", "memory must be at least 32Mi: a sandbox's init needs 32 MiB"},
		{"negative cpu", tenant + "spec: {sandbox: {resources: {cpu: \"-2\"}}}", "cpu must be at least 10m"},
		{"zero cpu", tenant + "spec: {sandbox: {resources: {cpu: \"0\"}}}", "cpu must be at least 10m"},
		{"zero cpu as a number", tenant + "spec: {sandbox: {resources: {cpu: 0}}}", "cpu must be at least 10m"},
		{"a millicore", sbx + "spec: {tenantRef: {name: t}, resources: {cpu: 1m}}", "cpu must be at least 10m"},
		{"memory of 1Ki", tenant + "spec: {sandbox: {resources: {memory: 1Ki}}}", "memory must be at least 32Mi"},
		{"memory in bytes", sbx + "spec: {tenantRef: {name: t}, resources: {memory: 1048576}}", "memory must be at least 32Mi"},
		{"memory of a VM", tenant + "spec: {sandbox: {backend: vm, resources: {memory: 64Mi}}}", "memory must be at least 128Mi on backend vm"},
		{"memory of a sandbox VM", sbx + "spec: {tenantRef: {name: t}, backend: vm, resources: {memory: 100Mi}}", "memory must be at least 128Mi on backend vm"},
		{"storage of 1Ki", tenant + "spec: {sandbox: {storage: {size: 1Ki}}}", "size must be at least 32Mi: the writable layer"},
		{"negative storage", sbx + "spec: {tenantRef: {name: t}, storage: {size: -4Gi}}", "size must be at least 32Mi: the writable layer"},
		{"pile of 1Ki", tenant + "spec: {pile: {size: 1Ki}}", "pile size must be at least 32Mi"},
		{"a sandbox's pile of 1Ki", sbx + "spec: {tenantRef: {name: t}, pile: {size: 1Ki}}", "pile size must be at least 32Mi"},
		{"an idle period of a second", tenant + "spec: {sandbox: {idleSuspend: {after: 1s}}}", "after must be at least 10s"},
		{"an idle period that is no duration", sbx + "spec: {tenantRef: {name: t}, idleSuspend: {after: soon}}", "spec.idleSuspend.after: Invalid value: \"soon\": after must be a duration such as 30s, 15m or 1h30m"},
		{"an idle period in days", tenant + "spec: {sandbox: {idleSuspend: {after: 1d}}}", "after must be a duration such as 30s"},
		{"a usage period in days", tenant + "spec: {sandbox: {usageLimits: {period: 1day, cpuSeconds: 5}}}", "period must be a duration such as 24h"},
		{"a snapshot kept a week", snap + "spec: {sandboxRef: {name: s}, expireAfter: 1week}", "expireAfter must be a duration such as 24h or 168h"},
		{"a build timeout in words", fb + "spec:\n" + cmSrc + "  binaries: [a]\n  build: {command: [make], timeout: ten minutes}", "timeout must be a duration such as 10m or 1h"},
		{"a worker timeout in words", wm + "spec: {tenantRef: {name: t}, destination: {service: {name: s, port: 80}}, timeout: a minute}", "timeout must be a duration such as 60s or 5m"},
		{"a worker timeout of nothing", wm + "spec: {tenantRef: {name: t}, destination: {service: {name: s, port: 80}}, timeout: 0s}", "timeout must be positive"},
		{"an idle mode of another kind", tenant + "spec: {sandbox: {idleSuspend: {after: 1m, mode: Hibernate}}}", "Unsupported value"},
		{"an idle suspension without its period", tenant + "spec: {sandbox: {idleSuspend: {withRunningJobs: true}}}", "after"},
		// Images: a reference with its registry, and nothing else.
		{"an image without a reference", tenant + "spec: {sandbox: {image: {}}}", "spec.sandbox.image.reference: Required value"},
		{"an image by URL", tenant + "spec: {sandbox: {image: {reference: 'https://registry.example.com/team/base:1'}}}", "reference takes no scheme: write registry.example.com/team/image:tag"},
		{"an image with a space", sbx + "spec: {tenantRef: {name: t}, image: {reference: 'registry.example.com/team/base:1 --privileged'}}", "reference must hold no spaces or control characters"},
		{"an image with a newline", tenant + "spec: {sandbox: {image: {reference: \"registry.example.com/team/base:1\\nx\"}}}", "reference must hold no spaces or control characters"},
		{"an image without its registry", tenant + "spec: {sandbox: {image: {reference: 'python:3.12'}}}", "a name without its registry (python:3.12) is not accepted"},
		{"an image of Docker Hub's short name", tenant + "spec: {sandbox: {image: {reference: 'library/python'}}}", "reference must be registry/repository[:tag][@sha256:digest]"},
		{"an image path that climbs", tenant + "spec: {sandbox: {image: {reference: 'registry.example.com/team/../other/x:1'}}}", "reference must be registry/repository[:tag][@sha256:digest]"},
		{"an image repository in capitals", tenant + "spec: {sandbox: {image: {reference: 'registry.example.com/Team/base'}}}", "a repository is lower-case letters, digits and . _ - between slashes"},
		{"an image digest too short", tenant + "spec: {sandbox: {image: {reference: 'registry.example.com/team/base@sha256:abc'}}}", "@sha256:<64 lower-case hexadecimal digits>"},
		{"an image digest of another algorithm", tenant + "spec: {sandbox: {image: {reference: 'registry.example.com/team/base@md5:" + strings.Repeat("a", 32) + "'}}}", "reference must be registry/repository"},
		{"an image reference too long", tenant + "spec: {sandbox: {image: {reference: 'registry.example.com/" + strings.Repeat("a", 600) + "'}}}", "may not be more than 512 bytes"},
		{"an unknown pull policy", tenant + "spec: {sandbox: {image: {reference: registry.example.com/a/b, pullPolicy: Never}}}", `spec.sandbox.image.pullPolicy: Unsupported value: "Never"`},
		{"nine pull secrets", tenant + "spec: {sandbox: {image: {reference: registry.example.com/a/b, pullSecrets: [{name: a}, {name: b}, {name: c}, {name: d}, {name: e}, {name: f}, {name: g}, {name: h}, {name: i}]}}}", "must have at most 8 items"},
		{"a pull secret twice", sbx + "spec: {tenantRef: {name: t}, image: {reference: registry.example.com/a/b, pullSecrets: [{name: a}, {name: a}]}}", "Duplicate value"},
	}
	ns := newNamespace(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.doc)
			obj.SetNamespace(ns)
			err := k8s.Create(context.Background(), obj)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want the API server to refuse it as invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused, but the message\n  %s\ndoes not say\n  %s", err, tc.want)
			}
		})
	}
}

// TestQuantitiesAtTheirMinimumsAreAccepted: the minimums refuse only what
// a node would, in every form a quantity takes.
func TestQuantitiesAtTheirMinimumsAreAccepted(t *testing.T) {
	const tenant = "apiVersion: playground.dev/v1alpha1\nkind: Tenant\nmetadata: {generateName: t-}\n"
	ns := newNamespace(t)
	for _, spec := range []string{
		"spec: {sandbox: {resources: {cpu: 10m, memory: 32Mi}, storage: {size: 32Mi, inodes: 256}}, pile: {size: 32Mi, inodes: 256}}",
		"spec: {sandbox: {resources: {cpu: 2, memory: 33554432}}}",
		"spec: {sandbox: {resources: {cpu: \"0.01\", memory: 1G}}}",
		"spec: {sandbox: {backend: vm, resources: {memory: 128Mi}}}",
		// Durations in every form Go writes and reads them.
		"spec: {sandbox: {idleSuspend: {after: 1h30m}, usageLimits: {period: 1.5h, cpuSeconds: 5}}}",
		"spec: {sandbox: {idleSuspend: {after: 10000ms}}}",
		// Images in every form a reference takes.
		"spec: {sandbox: {image: {reference: docker.io/library/python:3.12}}}",
		"spec: {sandbox: {image: {reference: registry.example.com/team/base}}}",
		"spec: {sandbox: {image: {reference: 'localhost:5000/team/ml-base_2.x:v1.2_rc-3'}}}",
		"spec: {sandbox: {image: {reference: 'registry:5000/base@sha256:" + strings.Repeat("0f", 32) + "'}}}",
		"spec: {sandbox: {image: {reference: '127.0.0.1:41234/private/base:1@sha256:" + strings.Repeat("ab", 32) + "', pullPolicy: Always, pullSecrets: [{name: regcred}]}}}",
	} {
		obj := decode(t, tenant+spec)
		obj.SetNamespace(ns)
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Errorf("%s: refused: %v", spec, err)
		}
	}
}

// TestTransitionRules holds the rules that span an update: a Sandbox's
// binding, tenant and backend are fixed once set.
func TestTransitionRules(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	update := func(t *testing.T, name string, mutate func(*playgroundv1alpha1.Sandbox)) error {
		t.Helper()
		var s playgroundv1alpha1.Sandbox
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		mutate(&s)
		return k8s.Update(ctx, &s)
	}
	create := func(t *testing.T, name, node string) {
		t.Helper()
		s := &playgroundv1alpha1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: playgroundv1alpha1.SandboxSpec{
				TenantRef: playgroundv1alpha1.LocalObjectReference{Name: "t"},
				NodeName:  node,
			},
		}
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("an unbound sandbox can be bound", func(t *testing.T) {
		create(t, "unbound", "")
		if err := update(t, "unbound", func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "node-a" }); err != nil {
			t.Fatalf("binding refused: %v", err)
		}
	})
	refusals := []struct {
		name   string
		mutate func(*playgroundv1alpha1.Sandbox)
		want   string
	}{
		{"rebinding", func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "node-b" }, "nodeName is set once: the sandbox's storage lives on that node"},
		{"unbinding", func(s *playgroundv1alpha1.Sandbox) { s.Spec.NodeName = "" }, "nodeName is set once"},
		{"changing tenant", func(s *playgroundv1alpha1.Sandbox) { s.Spec.TenantRef.Name = "other" }, "tenantRef is immutable"},
		{"changing backend", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Backend = playgroundv1alpha1.BackendLima }, "backend cannot change once set"},
		{"changing isolation", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Isolation = playgroundv1alpha1.IsolationGVisor }, "isolation cannot change once the sandbox exists"},
		{"starting again from a snapshot", func(s *playgroundv1alpha1.Sandbox) { s.Spec.FromSnapshot = "later" }, "fromSnapshot cannot change once the sandbox exists"},
	}
	create(t, "bound", "node-a")
	for _, tc := range refusals {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			err := update(t, "bound", tc.mutate)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want refusal saying %q, got %v", tc.want, err)
			}
		})
	}
	t.Run("naming the default isolation is no change", func(t *testing.T) {
		if err := update(t, "bound", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Isolation = playgroundv1alpha1.IsolationContainer }); err != nil {
			t.Fatalf("isolation container on a sandbox without one refused: %v", err)
		}
		err := update(t, "bound", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Isolation = playgroundv1alpha1.IsolationGVisor })
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "isolation cannot change") {
			t.Fatalf("container to gvisor: want a refusal, got %v", err)
		}
	})
	t.Run("resources can change on a bound sandbox", func(t *testing.T) {
		q := resource.MustParse("2Gi")
		if err := update(t, "bound", func(s *playgroundv1alpha1.Sandbox) { s.Spec.Resources.Memory = &q }); err != nil {
			t.Fatalf("resizing refused: %v", err)
		}
	})
}

func TestDefaultsAreApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	obj := decode(t, "apiVersion: playground.dev/v1alpha1\nkind: Tenant\nmetadata: {name: minimal}\n")
	obj.SetNamespace(ns)
	g.Expect(k8s.Create(ctx, obj)).To(Succeed())

	var tn playgroundv1alpha1.Tenant
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "minimal"}, &tn)).To(Succeed())
	g.Expect(tn.Spec.Catalog).To(Equal(playgroundv1alpha1.CatalogSandbox))
	g.Expect(tn.Spec.Sandbox.Backend).To(Equal(playgroundv1alpha1.BackendOCI))
	g.Expect(tn.Spec.Pile.ReclaimPolicy).To(Equal(playgroundv1alpha1.ReclaimRetain))
	g.Expect(tn.Spec.Sandbox.Resources.CPU).To(HaveValue(Equal(resource.MustParse("1"))))
	g.Expect(tn.Spec.Sandbox.Resources.Memory).To(HaveValue(Equal(resource.MustParse("1Gi"))))
	g.Expect(tn.Spec.Sandbox.Resources.PIDs).To(HaveValue(BeEquivalentTo(1024)))
	st := tn.Spec.Sandbox.Storage
	g.Expect(st.Size).To(HaveValue(Equal(resource.MustParse("4Gi"))))
	g.Expect(st.Inodes).To(HaveValue(BeEquivalentTo(262144)))
	g.Expect(tn.Spec.Pile.Size).To(HaveValue(Equal(resource.MustParse("512Mi"))))
	g.Expect(tn.Spec.Pile.Inodes).To(HaveValue(BeEquivalentTo(4096)))
	g.Expect(tn.Spec.Sandbox.Network.Mode).To(Equal(playgroundv1alpha1.NetworkNone))

	egress := decode(t, "apiVersion: playground.dev/v1alpha1\nkind: Tenant\nmetadata: {name: egress}\nspec: {sandbox: {network: {mode: egress, egress: [{cidr: 10.0.0.0/8, ports: [443, 53]}, {cidr: 203.0.113.7/32}, {host: pypi.org, ports: [443]}, {host: '*.githubusercontent.com'}, {host: api.test, ports: [443], checkServerName: true}, {host: llm.test, ports: [443], credential: {secretRef: {name: llm-key}}}, {cidr: '2001:db8::/32', ports: [443]}]}}}")
	egress.SetNamespace(ns)
	g.Expect(k8s.Create(ctx, egress)).To(Succeed())
	var eg playgroundv1alpha1.Tenant
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "egress"}, &eg)).To(Succeed())
	cred := eg.Spec.Sandbox.Network.Egress[5].Credential
	g.Expect(cred.Header).To(Equal("Authorization"), "a credential's header defaults to Authorization")
	g.Expect(cred.SecretRef.Key).To(Equal("token"), "and its key to token")

	wm := decode(t, "apiVersion: playground.dev/v1alpha1\nkind: WorkerMapping\nmetadata: {name: w}\nspec: {tenantRef: {name: minimal}, destination: {service: {name: mcp, port: 80}}}")
	wm.SetNamespace(ns)
	g.Expect(k8s.Create(ctx, wm)).To(Succeed())
	var m playgroundv1alpha1.WorkerMapping
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, &m)).To(Succeed())
	g.Expect(m.Spec.Destination.Service.Path).To(Equal("/mcp"))
	g.Expect(m.Spec.Destination.Service.Scheme).To(Equal("http"))
	g.Expect(m.Spec.Timeout.Duration.String()).To(Equal("1m0s"))

	fbObj := decode(t, "apiVersion: playground.dev/v1alpha1\nkind: FacultyBundle\nmetadata: {name: f}\nspec: {source: {configMap: {name: c}}, binaries: [a], build: {command: [make]}}")
	fbObj.SetNamespace(ns)
	g.Expect(k8s.Create(ctx, fbObj)).To(Succeed())
	var fb playgroundv1alpha1.FacultyBundle
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "f"}, &fb)).To(Succeed())
	g.Expect(fb.Spec.RetainStale).To(HaveValue(BeEquivalentTo(2)))
	g.Expect(fb.Spec.Build.Timeout.Duration.String()).To(Equal("10m0s"))

	// The longest build timeout, and a host path with dots in names.
	fbObj = decode(t, "apiVersion: playground.dev/v1alpha1\nkind: FacultyBundle\nmetadata: {name: longest}\nspec: {source: {hostPath: {path: /opt/tools..v2/.bin}}, binaries: [a], build: {command: [make], timeout: 1h}}")
	fbObj.SetNamespace(ns)
	g.Expect(k8s.Create(ctx, fbObj)).To(Succeed())
}

// TestKubectl runs the built kubectl against the test server: the field
// docs reach `kubectl explain`, and `kubectl get` shows the printer columns.
func TestKubectl(t *testing.T) {
	g := NewWithT(t)
	explains := map[string]string{
		"tenants.spec.suspended":          "revokes the tenant's access from the next request on",
		"sandboxes.spec.nodeName":         "Once set it cannot change",
		"workermappings.spec.destination": "exactly one of service or sandbox",
		"facultybundles.spec.binaries":    "allowlist of files",
		"tenants.status.credentials":      "without revealing it",
	}
	for field, want := range explains {
		out, err := cp.Kubectl(kubeconfig, "explain", field)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.Join(strings.Fields(out), " ")).To(ContainSubstring(want), "kubectl explain %s", field)
	}

	ns := newNamespace(t)
	for _, obj := range readSamples(t) {
		obj.SetNamespace(ns)
		g.Expect(k8s.Create(context.Background(), obj)).To(Succeed())
	}
	out, err := cp.Kubectl(kubeconfig, "get", "tenants,workermappings,facultybundles,sandboxes", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`NAME\s+CATALOG\s+READY\s+SUSPENDED\s+STATE\s+SANDBOX\s+AGE`))
	g.Expect(out).To(MatchRegexp(`tenant.playground.dev/demo\s+sandbox`))
	g.Expect(out).To(MatchRegexp(`NAME\s+TENANT\s+READY\s+REASON\s+ENDPOINT\s+RESTARTS\s+AGE`))
	g.Expect(out).To(MatchRegexp(`NAME\s+READY\s+REASON\s+NODES-READY\s+AGE`))

	// A snapshot's size is for people, in the SIZE column.
	snap := &playgroundv1alpha1.SandboxSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "before-upgrade"},
		Spec: playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: "demo"}}}
	g.Expect(k8s.Create(context.Background(), snap)).To(Succeed())
	snap.Status = playgroundv1alpha1.SandboxSnapshotStatus{Phase: playgroundv1alpha1.SnapshotReady, SizeBytes: 12_902_400,
		Size: playgroundv1alpha1.ByteSize(12_902_400)}
	g.Expect(k8s.Status().Update(context.Background(), snap)).To(Succeed())
	out, err = cp.Kubectl(kubeconfig, "get", "sandboxsnapshots", "-n", ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(MatchRegexp(`NAME\s+SANDBOX\s+PHASE\s+MEMORY\s+SIZE\s+NODE\s+TAKEN`))
	g.Expect(out).To(MatchRegexp(`before-upgrade\s+demo\s+Ready\s+12\.3 MiB\s`))

	out, err = cp.Kubectl(kubeconfig, "get", "playground", "-n", ns, "-o", "name")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("tenant.playground.dev/demo"))
	g.Expect(out).To(ContainSubstring("facultybundle.playground.dev/hello-tools"))

	out, err = cp.Kubectl(kubeconfig, "get", "tn,wm,fb,sbx", "-n", ns, "-o", "name")
	g.Expect(err).NotTo(HaveOccurred(), "short names")
	g.Expect(out).To(ContainSubstring("workermapping.playground.dev/worker-demo"))
}

// TestInvalidTenantPoliciesAreRefused: a TenantPolicy the admission policy
// could not read as its author meant is refused as it is written.
func TestInvalidTenantPoliciesAreRefused(t *testing.T) {
	const policy = "apiVersion: playground.dev/v1alpha1\nkind: TenantPolicy\nmetadata: {generateName: p-}\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"no namespace selector", policy + "spec: {}", "spec.namespaceSelector: Required value"},
		{"In without values", policy + "spec: {namespaceSelector: {matchExpressions: [{key: a, operator: In}]}}", "each matchExpression's operator is In or NotIn, with values"},
		{"Exists with values", policy + "spec: {namespaceSelector: {matchExpressions: [{key: a, operator: Exists, values: [b]}]}}", "each matchExpression's operator is In or NotIn, with values"},
		{"an unknown operator", policy + "spec: {namespaceSelector: {matchExpressions: [{key: a, operator: Matches, values: [b]}]}}", "each matchExpression's operator is In or NotIn, with values"},
		{"no backend allowed", policy + "spec: {namespaceSelector: {}, sandbox: {allowedBackends: []}}", "spec.sandbox.allowedBackends in body should have at least 1 items"},
		{"an unknown backend", policy + "spec: {namespaceSelector: {}, sandbox: {allowedBackends: [docker]}}", `Unsupported value: "docker"`},
		{"an unknown isolation", policy + "spec: {namespaceSelector: {}, sandbox: {allowedIsolations: [kata]}}", `Unsupported value: "kata"`},
		{"an unknown tool set", policy + "spec: {namespaceSelector: {}, allowedToolSets: [all]}", `Unsupported value: "all"`},
		{"an unknown catalog", policy + "spec: {namespaceSelector: {}, allowedCatalogs: [everything]}", `Unsupported value: "everything"`},
		{"an unknown network mode", policy + "spec: {namespaceSelector: {}, sandbox: {network: {allowedModes: [host]}}}", `Unsupported value: "host"`},
		{"an allowed cidr not a network", policy + "spec: {namespaceSelector: {}, sandbox: {network: {allowedEgress: {cidrs: [10.0.0.1/8]}}}}", "cidrs must be network addresses"},
		{"an allowed host a URL", policy + "spec: {namespaceSelector: {}, sandbox: {network: {allowedEgress: {hosts: ['https://pypi.org']}}}}", "hosts must be DNS names in lower case"},
		{"a usage period of a second", policy + "spec: {namespaceSelector: {}, sandbox: {usageLimit: {maxCPUSeconds: 10, period: 1s}}}", "period must be at least 10s"},
		{"a usage period in days", policy + "spec: {namespaceSelector: {}, sandbox: {usageLimit: {maxCPUSeconds: 10, period: 7d}}}", "period must be a duration such as 24h"},
		{"a usage limit of nothing", policy + "spec: {namespaceSelector: {}, sandbox: {usageLimit: {maxCPUSeconds: 0}}}", "spec.sandbox.usageLimit.maxCPUSeconds in body should be greater than or equal to 1"},
		{"a ceiling in gigabits", policy + "spec: {namespaceSelector: {}, sandbox: {max: {memory: 1Gb}}}", "memory must be a quantity of bytes"},
		{"a cpu ceiling in cores", policy + "spec: {namespaceSelector: {}, sandbox: {max: {cpu: 4cores}}}", "cpu must be a quantity of cores"},
		{"a storage ceiling in gigabytes", policy + "spec: {namespaceSelector: {}, sandbox: {max: {storageSize: 4GB, pileSize: 1GB}}}", "storageSize must be a quantity of bytes"},
		{"a pile ceiling in gigabytes", policy + "spec: {namespaceSelector: {}, sandbox: {max: {pileSize: 1GB}}}", "pileSize must be a quantity of bytes"},
		{"a namespace ceiling in gigabits", policy + "spec: {namespaceSelector: {}, namespace: {maxMemory: 64Gb}}", "maxMemory must be a quantity of bytes"},
		{"a namespace cpu ceiling in cores", policy + "spec: {namespaceSelector: {}, namespace: {maxCPU: 16cores}}", "maxCPU must be a quantity of cores"},
		{"no allowed images", policy + "spec: {namespaceSelector: {}, sandbox: {allowedImages: []}}", "spec.sandbox.allowedImages in body should have at least 1 items"},
		{"an allowed image with a scheme", policy + "spec: {namespaceSelector: {}, sandbox: {allowedImages: ['https://registry.example.com/']}}", "allowedImages must be registries or repositories, registry first"},
		{"an allowed image without its registry", policy + "spec: {namespaceSelector: {}, sandbox: {allowedImages: ['library/']}}", "allowedImages must be registries or repositories"},
		{"an allowed registry without its slash", policy + "spec: {namespaceSelector: {}, sandbox: {allowedImages: ['registry.example.com']}}", "allowedImages must be registries or repositories"},
		{"an allowed image with a tag", policy + "spec: {namespaceSelector: {}, sandbox: {allowedImages: ['docker.io/library/python:3.12']}}", "no scheme, tag or digest"},
		{"a signing key that is no PEM", policy + "spec: {namespaceSelector: {}, sandbox: {imageSignatures: {keys: [{name: release, publicKey: 'ssh-ed25519 AAAA'}]}}}", "publicKey must be a public key in PEM"},
		{"no signing keys", policy + "spec: {namespaceSelector: {}, sandbox: {imageSignatures: {keys: []}}}", "spec.sandbox.imageSignatures.keys in body should have at least 1 items"},
		{"two signing keys of one name", policy + "spec: {namespaceSelector: {}, sandbox: {imageSignatures: {keys: [{name: a, publicKey: '-----BEGIN PUBLIC KEY-----\\nA\\n-----END PUBLIC KEY-----'}, {name: a, publicKey: '-----BEGIN PUBLIC KEY-----\\nB\\n-----END PUBLIC KEY-----'}]}}}", "spec.sandbox.imageSignatures.keys[1]: Duplicate value"},
		{"a signing key of a bad name", policy + "spec: {namespaceSelector: {}, sandbox: {imageSignatures: {keys: [{name: Release/1, publicKey: '-----BEGIN PUBLIC KEY-----\\nA\\n-----END PUBLIC KEY-----'}]}}}", "name must be lower-case letters, digits"},
		{"a namespace storage ceiling in terabytes", policy + "spec: {namespaceSelector: {}, namespace: {maxStorage: 1TB}}", "maxStorage must be a quantity of bytes"},
		{"too few pids", policy + "spec: {namespaceSelector: {}, sandbox: {max: {pids: 1}}}", "spec.sandbox.max.pids in body should be greater than or equal to 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(context.Background(), decode(t, tc.doc))
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want the API server to refuse it as invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("refused, but the message\n  %s\ndoes not say\n  %s", err, tc.want)
			}
		})
	}
}

// patternsKept are the regular expressions of a spec that stay in the
// CRDs, with why a user never meets them: every other rule a user's spec
// can break answers with a sentence (a CEL rule's message), not with a
// regular expression to decode.
var patternsKept = map[string]string{
	"FacultyBundle spec.source.hostPath.path": "refuses only a NUL byte, which no path has; a relative path gets a sentence",
}

// TestSpecPatternsAreSentences: no spec field of a CRD is validated by a
// bare pattern (a Quantity's comes from its type unless the field's
// markers replace it, see SandboxResources), so that `memory: 1Gb` or
// `host: https://PyPI.org` is answered in words.
func TestSpecPatternsAreSentences(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("found %d CRDs (%v): the scan is broken", len(files), err)
	}
	kept := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names    struct{ Kind string }
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					}
				}
			}
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			props, _ := v.Schema.OpenAPIV3Schema["properties"].(map[string]any)
			spec, _ := props["spec"].(map[string]any)
			walkPatterns(spec, "spec", func(path, pattern string) {
				key := crd.Spec.Names.Kind + " " + path
				if _, ok := patternsKept[key]; ok {
					kept[key] = true
					return
				}
				t.Errorf("%s is validated by the bare pattern %q: say it in a sentence (a CEL rule with a message; for a Quantity, Schemaless and XIntOrString with an isQuantity rule)", key, pattern)
			})
		}
	}
	for key := range patternsKept {
		if !kept[key] {
			t.Errorf("patternsKept lists %s, which has no pattern any more: remove it from the list", key)
		}
	}
}

// walkPatterns calls found for every pattern of schema and its
// properties, items and alternatives.
func walkPatterns(schema map[string]any, path string, found func(path, pattern string)) {
	if schema == nil {
		return
	}
	if p, ok := schema["pattern"].(string); ok {
		found(path, p)
	}
	if props, ok := schema["properties"].(map[string]any); ok {
		for name, sub := range props {
			s, _ := sub.(map[string]any)
			walkPatterns(s, path+"."+name, found)
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		walkPatterns(items, path+"[]", found)
	}
	if add, ok := schema["additionalProperties"].(map[string]any); ok {
		walkPatterns(add, path+"[*]", found)
	}
	for _, k := range []string{"anyOf", "allOf", "oneOf"} {
		alts, _ := schema[k].([]any)
		for _, a := range alts {
			s, _ := a.(map[string]any)
			walkPatterns(s, path, found)
		}
	}
}

// TestByteSize: sizes for people, as status.size and the plugin write them.
func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 KiB", 1: "1 KiB", 1024: "1 KiB", 1025: "2 KiB", 1 << 20: "1.0 MiB", 12_902_400: "12.3 MiB", 3 << 29: "1.5 GiB"} {
		if got := playgroundv1alpha1.ByteSize(n); got != want {
			t.Errorf("ByteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
