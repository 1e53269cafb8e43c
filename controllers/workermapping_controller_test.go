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

package controllers

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	playgroundv1alpha1ac "github.com/playground-dev/playground/api/v1alpha1/applyconfiguration/api/v1alpha1"
	"github.com/playground-dev/playground/internal/destpolicy"
)

// Helpers of the WorkerMapping stories. No EndpointSlice controller runs
// against the test API server: the tests write the slices themselves, as
// it would for a Service (or as an operator does for a Service without a
// selector).

var workerMappingGVK = playgroundv1alpha1.GroupVersion.WithKind("WorkerMapping")

func newMapping(t *testing.T, ns, name, tenant string, dest playgroundv1alpha1.WorkerDestination, bearer *playgroundv1alpha1.SecretKeyReference) {
	t.Helper()
	wm := &playgroundv1alpha1.WorkerMapping{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.WorkerMappingSpec{
			TenantRef: playgroundv1alpha1.LocalObjectReference{Name: tenant}, Destination: dest, BearerSecretRef: bearer,
		},
	}
	if err := k8sClient.Create(context.Background(), wm); err != nil {
		t.Fatalf("creating worker mapping %s/%s: %v", ns, name, err)
	}
}

func getMapping(g Gomega, ns, name string) *playgroundv1alpha1.WorkerMapping {
	var wm playgroundv1alpha1.WorkerMapping
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &wm)).To(Succeed())
	return &wm
}

// mappingReady returns the mapping's Ready condition once it describes
// the current spec.
func mappingReady(g Gomega, ns, name string) (*playgroundv1alpha1.WorkerMapping, metav1.Condition) {
	wm := getMapping(g, ns, name)
	c := meta.FindStatusCondition(wm.Status.Conditions, playgroundv1alpha1.ReadyCondition)
	g.Expect(c).NotTo(BeNil(), "no Ready yet")
	g.Expect(c.ObservedGeneration).To(Equal(wm.Generation))
	g.Expect(wm.Status.ObservedGeneration).To(Equal(wm.Generation))
	return wm, *c
}

func serviceDest(name string, port int32, path string) playgroundv1alpha1.WorkerDestination {
	return playgroundv1alpha1.WorkerDestination{Service: &playgroundv1alpha1.ServiceDestination{Name: name, Port: port, Path: path}}
}

func sandboxDest(port int32) playgroundv1alpha1.WorkerDestination {
	return playgroundv1alpha1.WorkerDestination{Sandbox: &playgroundv1alpha1.SandboxProcessDestination{
		Command: []string{"/opt/faculties/bin/worker", "--listen", "127.0.0.1:8765"}, Port: port,
	}}
}

// endpoint is one endpoint of a slice: its address and ready condition
// (nil: unset, which means ready).
type endpoint struct {
	ip    string
	ready *bool
}

// writeSlice creates or updates the EndpointSlice name of service svc,
// with one port named portName of number port, as the EndpointSlice
// controller writes it.
func writeSlice(t *testing.T, ns, name, svc string, family discoveryv1.AddressType, portName string, port int32, eps ...endpoint) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}})
	}
	ctx := context.Background()
	var cur discoveryv1.EndpointSlice
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(s), &cur); err == nil {
		cur.Endpoints, cur.Ports = s.Endpoints, s.Ports
		if err := k8sClient.Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := k8sClient.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
}

// mappingEvents returns the Events about the mapping, by reason.
func mappingEvents(g Gomega, ns, name string) map[string][]eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := map[string][]eventsv1.Event{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "WorkerMapping" && e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e)
		}
	}
	return out
}

// TestWorkerMappingService: an operator maps a tenant to a Service before
// the Service exists, then creates it, then its backends come up: the
// mapping says what it waits for at each step, then lists the ready
// endpoints of the right port (a named targetPort resolved per slice),
// without those not ready; the tenant's WorkerReady follows. A bearer
// Secret that is missing holds it back until it is created.
func TestWorkerMappingService(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	newTenant(t, ns, "svc-tenant", playgroundv1alpha1.TenantSpec{Catalog: playgroundv1alpha1.CatalogWorkers})
	newMapping(t, ns, "svc-map", "svc-tenant", serviceDest("worker", 80, "/rpc"), nil)

	expectReason := func(reason string, contains ...string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			_, c := mappingReady(g, ns, "svc-map")
			g.Expect(c.Reason).To(Equal(reason), c.Message)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			for _, s := range contains {
				g.Expect(c.Message).To(ContainSubstring(s))
			}
			g.Expect(kstatusOf(g, workerMappingGVK, ns, "svc-map").Status).To(Equal(status.InProgressStatus), "it waits for the world, it is not stuck")
			w := tenantCondition(getTenant(g, ns, "svc-tenant"), playgroundv1alpha1.WorkerReadyCondition)
			g.Expect([]string{string(w.Status), w.Reason}).To(Equal([]string{"False", reason}), "the tenant's WorkerReady mirrors the mapping")
		})
	}
	expectReason(ReasonServiceNotFound, "Service worker does not exist")

	// The Service: a named target port, and a second port that is not the worker's.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9100)},
			{Name: "mcp", Port: 80, TargetPort: intstr.FromString("mcp-http")},
		}},
	}
	if err := k8sClient.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	expectReason(ReasonNoReadyEndpoints, "no ready endpoint for port 80")
	g := NewWithT(t)
	g.Expect(getMapping(g, ns, "svc-map").Status.Endpoint).To(Equal("http://worker." + ns + ".svc:80/rpc"))

	// Two slices, as for pods whose named port has different numbers; one
	// of another Service, and one of the metrics port only.
	yes, no := ptr.To(true), ptr.To(false)
	writeSlice(t, ns, "worker-a", "worker", discoveryv1.AddressTypeIPv4, "mcp", 8080,
		endpoint{"10.244.0.2", yes}, endpoint{"10.244.0.1", nil}, endpoint{"10.244.0.3", no})
	writeSlice(t, ns, "worker-b", "worker", discoveryv1.AddressTypeIPv6, "mcp", 8081, endpoint{"fd00::1", yes})
	writeSlice(t, ns, "worker-metrics", "worker", discoveryv1.AddressTypeIPv4, "metrics", 9100, endpoint{"10.0.9.9", yes})
	writeSlice(t, ns, "other-a", "other", discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{"10.1.0.1", yes})
	want := []string{"http://10.244.0.1:8080/rpc", "http://10.244.0.2:8080/rpc", "http://[fd00::1]:8081/rpc"}
	eventually(t, func(g Gomega) {
		wm, c := mappingReady(g, ns, "svc-map")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(wm.Status.ReadyEndpoints).To(Equal(want))
		g.Expect(wm.Status.Endpoint).To(Equal("http://worker." + ns + ".svc:80/rpc"))
		g.Expect(kstatusOf(g, workerMappingGVK, ns, "svc-map").Status).To(Equal(status.CurrentStatus))
		w := tenantCondition(getTenant(g, ns, "svc-tenant"), playgroundv1alpha1.WorkerReadyCondition)
		g.Expect(w.Status).To(Equal(metav1.ConditionTrue), w.Message)
		g.Expect(mappingEvents(g, ns, "svc-map")).To(HaveKey(playgroundv1alpha1.ReasonReady))
	})

	// Backends go unready: nowhere to forward, and the list empties.
	writeSlice(t, ns, "worker-a", "worker", discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{"10.244.0.2", no})
	writeSlice(t, ns, "worker-b", "worker", discoveryv1.AddressTypeIPv6, "mcp", 8081, endpoint{"fd00::1", no})
	expectReason(ReasonNoReadyEndpoints)
	eventually(t, func(g Gomega) {
		g.Expect(getMapping(g, ns, "svc-map").Status.ReadyEndpoints).To(BeEmpty())
		g.Expect(mappingEvents(g, ns, "svc-map")).To(HaveKey(ReasonNoReadyEndpoints), "ceasing to be Ready is an Event")
	})

	// A bearer Secret that does not exist: not served, and found once created.
	writeSlice(t, ns, "worker-a", "worker", discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{"10.244.0.2", yes})
	eventually(t, func(g Gomega) {
		wm := getMapping(g, ns, "svc-map")
		wm.Spec.BearerSecretRef = &playgroundv1alpha1.SecretKeyReference{Name: "worker-bearer", Key: "bearer"}
		g.Expect(k8sClient.Update(ctx, wm)).To(Succeed())
	})
	expectReason(ReasonBearerSecretNotFound, "Secret worker-bearer", "does not exist")
	bearer := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker-bearer"}, Type: playgroundv1alpha1.WorkerBearerSecretType, Data: map[string][]byte{"token": []byte("x")}}
	if err := k8sClient.Create(ctx, bearer); err != nil {
		t.Fatal(err)
	}
	expectReason(ReasonBearerSecretNotFound, "has no key bearer")
	bearer.Data = map[string][]byte{"bearer": []byte("internal-bearer")}
	if err := k8sClient.Update(ctx, bearer); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		wm, c := mappingReady(g, ns, "svc-map")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(c.Message).To(ContainSubstring("Secret worker-bearer"))
		g.Expect(wm.Status.ReadyEndpoints).To(Equal([]string{"http://10.244.0.2:8080/rpc"}))
	})
	g.Expect(managerLogs()).NotTo(ContainSubstring("internal-bearer"))

	// The Service goes: not found again.
	if err := k8sClient.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	expectReason(ReasonServiceNotFound)

	// A port the Service does not have: a mistake to correct, Stalled.
	if err := k8sClient.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "mcp", Port: 8080}}},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		_, c := mappingReady(g, ns, "svc-map")
		g.Expect(c.Reason).To(Equal(ReasonServicePortNotFound))
		g.Expect(c.Message).To(ContainSubstring("no TCP port 80 (its ports: 8080/TCP (mcp))"))
		g.Expect(kstatusOf(g, workerMappingGVK, ns, "svc-map").Status).To(Equal(status.FailedStatus))
	})
}

// TestWorkerMappingConflicts: two mappings for one tenant, or two for one
// Service port and path, are both reported, each naming the other, and
// neither is Ready (so the gateway serves neither); deleting one, or
// moving it elsewhere, makes the other Ready.
func TestWorkerMappingConflicts(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	for _, name := range []string{"dup-tenant", "svc-one", "svc-two"} {
		newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{Catalog: playgroundv1alpha1.CatalogWorkers})
	}
	if err := k8sClient.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}); err != nil {
		t.Fatal(err)
	}
	writeSlice(t, ns, "shared-a", "shared", discoveryv1.AddressTypeIPv4, "", 8080, endpoint{"10.2.0.1", nil})

	conflicted := func(name, other string) func(g Gomega) {
		return func(g Gomega) {
			wm, c := mappingReady(g, ns, name)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(ReasonConflict))
			g.Expect(c.Message).To(ContainSubstring("WorkerMapping " + other))
			g.Expect(wm.Status.ReadyEndpoints).To(BeEmpty(), "a conflicting mapping lists nowhere to forward")
			g.Expect(kstatusOf(g, workerMappingGVK, ns, name).Status).To(Equal(status.FailedStatus))
			g.Expect(mappingEvents(g, ns, name)).To(HaveKey(ReasonConflict))
		}
	}

	// One tenant, two mappings (here: both sandbox workers).
	newMapping(t, ns, "first", "dup-tenant", sandboxDest(8765), nil)
	newMapping(t, ns, "second", "dup-tenant", sandboxDest(8766), nil)
	eventually(t, conflicted("first", "second"))
	eventually(t, conflicted("second", "first"))
	eventually(t, func(g Gomega) {
		w := tenantCondition(getTenant(g, ns, "dup-tenant"), playgroundv1alpha1.WorkerReadyCondition)
		g.Expect(w.Reason).To(Equal(ReasonConflict))
		g.Expect(w.Message).To(ContainSubstring("first, second"))
	})
	if err := k8sClient.Delete(ctx, &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		_, c := mappingReady(g, ns, "first")
		g.Expect(c.Reason).NotTo(Equal(ReasonConflict), "the conflict ended with the other mapping")
		g.Expect(c.Reason).To(Equal(ReasonSandboxNotReady), c.Message) // no agent runs it: it waits for its sandbox
	})

	// Two tenants, one Service port and path.
	newMapping(t, ns, "one", "svc-one", serviceDest("shared", 80, "/mcp"), nil)
	newMapping(t, ns, "two", "svc-two", serviceDest("shared", 80, "/mcp"), nil)
	eventually(t, conflicted("one", "two"))
	eventually(t, conflicted("two", "one"))

	// Another path of the same Service is another destination.
	eventually(t, func(g Gomega) {
		wm := getMapping(g, ns, "two")
		wm.Spec.Destination.Service.Path = "/other"
		g.Expect(k8sClient.Update(ctx, wm)).To(Succeed())
	})
	for name, path := range map[string]string{"one": "/mcp", "two": "/other"} {
		eventually(t, func(g Gomega) {
			wm, c := mappingReady(g, ns, name)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(wm.Status.ReadyEndpoints).To(Equal([]string{"http://10.2.0.1:8080" + path}))
			g.Expect(meta.FindStatusCondition(wm.Status.Conditions, playgroundv1alpha1.StalledCondition)).To(BeNil())
		})
	}
}

// TestWorkerMappingSandbox: a workers tenant's mapping to a worker in its
// sandbox names the sandbox's ID once its agent has provisioned it, and is
// Ready with it; the agent's report of the worker (status.worker) is never
// touched by the manager; the tenant is Ready only with its mapping; a
// tenant switched to the sandbox catalog makes the mapping a mistake to
// correct, and loses WorkerReady.
func TestWorkerMappingSandbox(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	const name = "native"
	zone := "workers-" + rand.String(5)
	node := "workers-node-" + rand.String(5)
	registerAgent(t, node, map[string]string{"zone": zone}, time.Hour)
	newTenant(t, ns, name, playgroundv1alpha1.TenantSpec{
		Catalog: playgroundv1alpha1.CatalogWorkers,
		Sandbox: playgroundv1alpha1.SandboxTemplate{NodeSelector: map[string]string{"zone": zone}},
	})
	issuedToken(t, ns, name)

	// No mapping yet: the tenant says what is missing, and is not Ready.
	eventually(t, func(g Gomega) {
		tn := getTenant(g, ns, name)
		w := tenantCondition(tn, playgroundv1alpha1.WorkerReadyCondition)
		g.Expect([]string{string(w.Status), w.Reason}).To(Equal([]string{"False", ReasonNoMapping}))
		g.Expect(w.Message).To(ContainSubstring("spec.tenantRef.name: " + name))
		g.Expect(tenantCondition(tn, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
	})

	newMapping(t, ns, name, name, sandboxDest(8765), &playgroundv1alpha1.SecretKeyReference{Name: "unused"})
	eventually(t, func(g Gomega) {
		_, c := mappingReady(g, ns, name)
		g.Expect(c.Reason).To(Equal(ReasonSandboxNotReady), "not provisioned yet: %s", c.Message)
	})
	// The node's agent provisions the sandbox (markProvisioned writes its
	// part of the status as the agent does, with the ID it chose).
	eventually(t, func(g Gomega) { g.Expect(getSandbox(g, ns, name).Spec.NodeName).To(Equal(node)) })
	eventually(t, func(g Gomega) { markProvisioned(g, getSandbox(g, ns, name)) })
	var id string
	eventually(t, func(g Gomega) {
		id = getSandbox(g, ns, name).Status.SandboxID
		wm, c := mappingReady(g, ns, name)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(c.Message).To(ContainSubstring("spec.bearerSecretRef (Secret unused) is ignored"))
		g.Expect(wm.Status.Endpoint).To(Equal("sandbox://" + id + ":8765/mcp"))
		g.Expect(wm.Status.ReadyEndpoints).To(BeEmpty())
		tn := getTenant(g, ns, name)
		g.Expect(tenantCondition(tn, playgroundv1alpha1.WorkerReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(tenantCondition(tn, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(kstatusOf(g, tenantGVK, ns, name).Status).To(Equal(status.CurrentStatus))
	})

	// The agent reports its worker, under its own field manager, as it
	// does; the manager's next writes (a path change) leave it alone.
	worker := playgroundv1alpha1ac.WorkerProcessStatus().WithRunning(true).WithRestarts(2).WithLastExit("exit status 1")
	g := NewWithT(t)
	g.Expect(k8sClient.Status().Apply(ctx, playgroundv1alpha1ac.WorkerMapping(name, ns).WithStatus(playgroundv1alpha1ac.WorkerMappingStatus().WithWorker(worker)),
		client.FieldOwner(playgroundv1alpha1.AgentNodeFieldOwner(node)), client.ForceOwnership)).To(Succeed())
	eventually(t, func(g Gomega) {
		wm := getMapping(g, ns, name)
		wm.Spec.Destination.Sandbox.Path = "/v2/mcp"
		g.Expect(k8sClient.Update(ctx, wm)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		wm, c := mappingReady(g, ns, name)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(wm.Status.Endpoint).To(Equal("sandbox://" + id + ":8765/v2/mcp"))
		g.Expect(wm.Status.Worker).NotTo(BeNil())
		g.Expect(wm.Status.Worker.Restarts).To(BeEquivalentTo(2))
		for _, m := range wm.ManagedFields {
			if m.Manager == playgroundv1alpha1.WorkerMappingControllerFieldOwner {
				g.Expect(m.FieldsV1.GetRawString()).NotTo(ContainSubstring(`"f:worker"`), "the manager claims the agent's field")
			}
		}
	})

	// Catalog sandbox: the mapping is never used; the tenant has no WorkerReady.
	updateTenant(t, ns, name, func(tn *playgroundv1alpha1.Tenant) { tn.Spec.Catalog = playgroundv1alpha1.CatalogSandbox })
	eventually(t, func(g Gomega) {
		_, c := mappingReady(g, ns, name)
		g.Expect(c.Reason).To(Equal(ReasonCatalogMismatch))
		g.Expect(c.Message).To(ContainSubstring("set spec.catalog: workers on Tenant " + name))
		g.Expect(kstatusOf(g, workerMappingGVK, ns, name).Status).To(Equal(status.FailedStatus))
		tn := getTenant(g, ns, name)
		g.Expect(meta.FindStatusCondition(tn.Status.Conditions, playgroundv1alpha1.WorkerReadyCondition)).To(BeNil())
		g.Expect(tenantCondition(tn, playgroundv1alpha1.ReadyCondition).Status).To(Equal(metav1.ConditionTrue))
	})
}

// TestReadyEndpoints holds how slices map to URLs, without an API server.
func TestReadyEndpoints(t *testing.T) {
	g := NewWithT(t)
	sp := corev1.ServicePort{Name: "", Port: 80, TargetPort: intstr.FromInt32(9000)}
	slice := func(family discoveryv1.AddressType, port *int32, proto corev1.Protocol, addrs ...string) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{AddressType: family, Ports: []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: port, Protocol: ptr.To(proto)}}}
		for _, a := range addrs {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
		}
		return s
	}
	node := func(a netip.Addr) (string, bool) {
		return "the address of node n", a == netip.MustParseAddr("10.0.0.7")
	}
	check := func(addr string) error { return destpolicy.Policy{}.CheckHost(addr, node) }
	got, refused := readyEndpoints(sp, []discoveryv1.EndpointSlice{
		slice(discoveryv1.AddressTypeIPv4, ptr.To[int32](8080), corev1.ProtocolTCP, "10.0.0.2", "10.0.0.1"),
		slice(discoveryv1.AddressTypeIPv4, ptr.To[int32](8080), corev1.ProtocolTCP, "10.0.0.1"), // repeated during a move
		slice(discoveryv1.AddressTypeIPv4, nil, corev1.ProtocolTCP, "10.0.0.5"),                 // no number: the numeric targetPort
		slice(discoveryv1.AddressTypeIPv4, ptr.To[int32](53), corev1.ProtocolUDP, "10.0.0.9"),
		slice(discoveryv1.AddressTypeFQDN, ptr.To[int32](8080), corev1.ProtocolTCP, "worker.example"),
		slice(discoveryv1.AddressTypeIPv4, ptr.To[int32](8080), corev1.ProtocolTCP, "10.0.0.7", "10.0.0.7"), // a node's, twice
		slice(discoveryv1.AddressTypeIPv6, ptr.To[int32](8080), corev1.ProtocolTCP, "fd00:ec2::254"),        // metadata
	}, "https", "/mcp", check)
	g.Expect(got).To(Equal([]string{"https://10.0.0.1:8080/mcp", "https://10.0.0.2:8080/mcp", "https://10.0.0.5:9000/mcp"}))
	g.Expect(strings.Join(got, "")).NotTo(ContainSubstring("worker.example"))
	g.Expect(refused).To(HaveLen(2))
	g.Expect(describeRefused(refused)).To(And(ContainSubstring("10.0.0.7 is the address of node n"), ContainSubstring("fd00:ec2::254 is loopback, link-local (cloud metadata)")))
}

// TestWorkerMappingRefusesWhatIsNotAWorkers: a team that may create
// WorkerMappings, Services and EndpointSlices in its namespace tries to
// have the gateway present another tenant's credential as a worker's
// bearer, and to forward to a node's address and to the control plane.
// Each mapping is refused with a condition that says why, and publishes
// no endpoint for the gateway to dial.
func TestWorkerMappingRefusesWhatIsNotAWorkers(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	newTenant(t, ns, "victim", playgroundv1alpha1.TenantSpec{})
	newTenant(t, ns, "thief", playgroundv1alpha1.TenantSpec{Catalog: playgroundv1alpha1.CatalogWorkers})
	eventually(t, func(g Gomega) {
		var s corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName("victim")}, &s)).To(Succeed())
	})
	if err := k8sClient.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "worker"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "mcp", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}); err != nil {
		t.Fatal(err)
	}
	writeSlice(t, ns, "worker-a", "worker", discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{"10.244.7.1", nil})

	expectRefused := func(reason string, contains ...string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			wm, c := mappingReady(g, ns, "thief")
			g.Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"False", reason}), c.Message)
			for _, s := range contains {
				g.Expect(c.Message).To(ContainSubstring(s))
			}
			g.Expect(wm.Status.ReadyEndpoints).To(BeEmpty(), "nothing for the gateway to dial")
			g.Expect(kstatusOf(g, workerMappingGVK, ns, "thief").Status).To(Equal(status.FailedStatus), "stalled until someone changes it")
		})
	}

	// The victim's credential Secret as the worker's bearer.
	newMapping(t, ns, "thief", "thief", serviceDest("worker", 80, "/mcp"),
		&playgroundv1alpha1.SecretKeyReference{Name: playgroundv1alpha1.CredentialSecretName("victim"), Key: playgroundv1alpha1.CredentialTokenKey})
	expectRefused(ReasonBearerSecretRefused, `is of type "playground.dev/tenant-token", not playground.dev/worker-bearer`)

	// A Secret made for the use is presented.
	if err := k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bearer"},
		Type: playgroundv1alpha1.WorkerBearerSecretType, Data: map[string][]byte{"token": []byte("internal")}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		wm := getMapping(g, ns, "thief")
		wm.Spec.BearerSecretRef = &playgroundv1alpha1.SecretKeyReference{Name: "bearer", Key: "token"}
		g.Expect(k8sClient.Update(ctx, wm)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		wm, c := mappingReady(g, ns, "thief")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(wm.Status.ReadyEndpoints).To(Equal([]string{"http://10.244.7.1:8080/mcp"}))
	})

	// A node's address.
	testNode(t, "worker-refusal-node", "10.250.0.1")
	writeSlice(t, ns, "worker-a", "worker", discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{"10.250.0.1", nil})
	expectRefused(ReasonEndpointsRefused, "10.250.0.1 is the address of node worker-refusal-node")

	// The control plane: the kubernetes Service's cluster IP.
	var api corev1.Service
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, &api); err != nil {
		t.Fatal(err)
	}
	writeSlice(t, ns, "worker-a", "worker", discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{api.Spec.ClusterIP, nil})
	expectRefused(ReasonEndpointsRefused, api.Spec.ClusterIP+" is the control plane's")

	// Beside a pod's address, the refused one is named and not forwarded to.
	writeSlice(t, ns, "worker-a", "worker", discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{"10.250.0.1", nil}, endpoint{"10.244.7.2", nil})
	eventually(t, func(g Gomega) {
		wm, c := mappingReady(g, ns, "thief")
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(c.Message).To(ContainSubstring("none of the 1 it refuses (10.250.0.1 is the address of node"))
		g.Expect(wm.Status.ReadyEndpoints).To(Equal([]string{"http://10.244.7.2:8080/mcp"}))
	})
}
