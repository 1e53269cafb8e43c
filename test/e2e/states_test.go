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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/kubectl-playground/kubectlplugin"
	"github.com/playground-dev/playground/hostagent/agentapi"
)

// table is what kubectl get prints of a kind in a namespace: the API
// server's Table of it (the CRD's printer columns), by column name, for
// the row of name; and the priority of each column (1: -o wide only).
func table(t *testing.T, ns, resource, name string) (cells map[string]string, priority map[string]int32) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/apis/playground.dev/v1alpha1/namespaces/%s/%s", strings.TrimSuffix(cp.Config.Host, "/"), ns, resource), http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("kubectl get %s: %d %v %s", resource, resp.StatusCode, err, body)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil {
		t.Fatal(err)
	}
	cells, priority = map[string]string{}, map[string]int32{}
	for _, row := range tbl.Rows {
		if len(row.Cells) == 0 || row.Cells[0] != name {
			continue
		}
		for i, col := range tbl.ColumnDefinitions {
			cells[col.Name] = fmt.Sprint(row.Cells[i])
			priority[col.Name] = col.Priority
		}
	}
	return cells, priority
}

// TestRuntimeStatesVisible: a tenant created with the plugin, extended
// tools and an idle policy of Pause after 10 s, left without calls. Its
// sleep is in the Sandbox's status (Running=False, IdlePaused, saying what
// the next call does) in one status write, the agent's: the manager's
// phase and Ready stay. The Tenant mirrors it; kubectl get sbx and get
// tenants show it in their State column (and, with -o wide, the tools,
// isolation and idle policy); kubectl playground status shows it with the
// settings; an Event says it. The next call, on a session opened before,
// wakes it and is served; every view says Running again.
func TestRuntimeStatesVisible(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startManager(t)
	n := &node{name: "states-1", labels: pool("states"), stateWriteInterval: time.Second}
	startNode(t, n)
	ns := newNamespace(t)
	kubectl := func(args ...string) (string, error) {
		var out, errOut strings.Builder
		err := kubectlplugin.Run(ctx, append([]string{"-n", ns, "--timeout", "60s"}, args...), kubectlplugin.Env{Out: &out, ErrOut: &errOut, Config: cp.Config})
		return out.String() + errOut.String(), err
	}
	out, err := kubectl("tenant", "create", "napper", "--tools", "extended", "--idle-suspend", "10s", "--idle-mode", "Pause",
		"--node-selector", "e2e-pool=states", "--wait")
	g.Expect(err).NotTo(HaveOccurred(), out)
	_, sbx := waitReady(t, ns, "napper")

	// A session held throughout: the sleep and the wake change nothing
	// else of the status (its handles, its phase).
	agent, err := agentapi.NewClient(sbx.Status.Endpoint, agentToken, nil)
	g.Expect(err).NotTo(HaveOccurred())
	tenant := ns + "/napper"
	h, err := agent.Open(ctx, tenant, sbx.Status.SandboxID)
	g.Expect(err).NotTo(HaveOccurred())
	exec := func() {
		res, err := agent.Exec(ctx, tenant, h.ID, agentapi.ExecRequest{Command: "echo awake"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(res.Stdout)).To(Equal("awake\n"))
	}

	// Every write of the Sandbox's status, but for its usage figures
	// (written once a minute), seen through a watch.
	watcher, err := client.NewWithWatch(cp.Config, client.Options{Scheme: k8sClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := watcher.Watch(ctx, &playgroundv1alpha1.SandboxList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	var (
		mu     sync.Mutex
		writes []playgroundv1alpha1.SandboxStatus
	)
	go func() {
		var last *playgroundv1alpha1.SandboxStatus
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*playgroundv1alpha1.Sandbox)
			if !ok || ev.Type == watch.Error {
				continue
			}
			cur := s.Status.DeepCopy()
			cur.Usage = nil
			if last != nil && equality.Semantic.DeepEqual(*last, *cur) {
				continue
			}
			last = cur
			mu.Lock()
			writes = append(writes, *cur)
			mu.Unlock()
		}
	}()
	seen := func() []playgroundv1alpha1.SandboxStatus {
		mu.Lock()
		defer mu.Unlock()
		return append([]playgroundv1alpha1.SandboxStatus(nil), writes...)
	}
	running := func(s playgroundv1alpha1.SandboxStatus) string {
		if c := meta.FindStatusCondition(s.Conditions, playgroundv1alpha1.RunningCondition); c != nil {
			return c.Reason
		}
		return ""
	}
	// Settled: the session's handle and the manager's phase for it.
	g.Eventually(func(g Gomega) {
		all := seen()
		g.Expect(all).NotTo(BeEmpty())
		last := all[len(all)-1]
		g.Expect(last.OpenHandles).To(BeEquivalentTo(1))
		g.Expect(last.Phase).To(Equal(playgroundv1alpha1.SandboxReady))
		g.Expect(running(last)).To(Equal(playgroundv1alpha1.ReasonRunning))
	}).WithTimeout(settle).Should(Succeed())
	exec()
	before := len(seen())

	// Ten seconds without calls: paused.
	var paused metav1.Condition
	g.Eventually(func(g Gomega) {
		all := seen()
		g.Expect(all).NotTo(BeEmpty())
		c := meta.FindStatusCondition(all[len(all)-1].Conditions, playgroundv1alpha1.RunningCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(playgroundv1alpha1.ReasonIdlePaused))
		paused = *c
	}).WithTimeout(settle).WithPolling(100 * time.Millisecond).Should(Succeed())
	g.Expect(paused.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(paused.Message).To(SatisfyAll(ContainSubstring("after 10s without calls"), ContainSubstring("the next call thaws it")))
	time.Sleep(3 * time.Second) // the interval in which another write would show, not a wait for a condition
	sleep := seen()[before:]
	g.Expect(sleep).To(HaveLen(1), "the sleep's status writes")
	g.Expect(sleep[0].Phase).To(Equal(playgroundv1alpha1.SandboxReady), "the phase does not follow a sleep")
	g.Expect(meta.IsStatusConditionTrue(sleep[0].Conditions, playgroundv1alpha1.ReadyCondition)).To(BeTrue(), "a sleeping sandbox serves: the next call wakes it")

	// Every view says it.
	g.Eventually(func(g Gomega) {
		var tn playgroundv1alpha1.Tenant
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "napper"}, &tn)).To(Succeed())
		c := meta.FindStatusCondition(tn.Status.Conditions, playgroundv1alpha1.SandboxRunningCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect([]string{c.Reason, c.Message}).To(Equal([]string{paused.Reason, paused.Message}))
	}).WithTimeout(settle).Should(Succeed())
	cells, _ := table(t, ns, "sandboxes", "napper")
	g.Expect(cells).To(HaveKeyWithValue("State", "IdlePaused"))
	g.Expect(cells).To(HaveKeyWithValue("Phase", "Ready"))
	cells, priority := table(t, ns, "tenants", "napper")
	g.Expect(cells).To(And(HaveKeyWithValue("State", "IdlePaused"), HaveKeyWithValue("Tools", "extended"), HaveKeyWithValue("Isolation", "container"),
		HaveKeyWithValue("Idle", "10s"), HaveKeyWithValue("Idle Mode", "Pause")))
	g.Expect(priority).To(And(HaveKeyWithValue("State", BeZero()), HaveKeyWithValue("Tools", BeEquivalentTo(1)), HaveKeyWithValue("Idle", BeEquivalentTo(1))))
	out, err = kubectl("status", "napper")
	g.Expect(err).NotTo(HaveOccurred(), out)
	words := strings.Join(strings.Fields(out), " ")
	g.Expect(words).To(SatisfyAll(
		MatchRegexp(`napper sandbox True Ready IdlePaused states-1 \S+ connect \(asleep: the next call wakes it\)`),
		ContainSubstring("BACKEND ISOLATION TOOLS IDLE oci container extended Pause after 10s"),
		ContainSubstring("sandbox/napper Running False IdlePaused "+paused.Message)))
	event := func(reason string) eventsv1.Event {
		var found eventsv1.Event
		g.Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			for _, e := range list.Items {
				if e.Regarding.Kind == "Sandbox" && e.Regarding.Name == "napper" && e.Reason == reason {
					found = e
					return
				}
			}
			g.Expect(list.Items).To(ContainElement(HaveField("Reason", reason)))
		}).WithTimeout(settle).Should(Succeed())
		return found
	}
	g.Expect(event(playgroundv1alpha1.ReasonIdlePaused).Action).To(Equal("Sleep"))

	// The next call wakes it, and is served; every view says Running.
	before = len(seen())
	exec()
	g.Eventually(func() string { all := seen(); return running(all[len(all)-1]) }).WithTimeout(settle).Should(Equal(playgroundv1alpha1.ReasonRunning))
	g.Expect(seen()[before:]).To(HaveLen(1), "the wake's status writes")
	g.Expect(event(playgroundv1alpha1.ReasonRunning).Action).To(Equal("Wake"))
	g.Eventually(func(g Gomega) {
		cells, _ := table(t, ns, "tenants", "napper")
		g.Expect(cells).To(HaveKeyWithValue("State", "Running"))
	}).WithTimeout(settle).Should(Succeed())
	out, err = kubectl("status", "napper")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(strings.Join(strings.Fields(out), " ")).To(MatchRegexp(`napper sandbox True Ready Running states-1 \S+ connect: kubectl playground attach napper`))
}
