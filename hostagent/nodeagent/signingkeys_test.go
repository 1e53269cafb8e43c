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

package nodeagent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/backend/oci"
	"github.com/playground-dev/playground/hostagent/backend/oci/ocitest"
	"github.com/playground-dev/playground/hostagent/nodeagent"
	"github.com/playground-dev/playground/hostagent/sandboxids"
	"github.com/playground-dev/playground/internal/signingkey"
)

// TestWarmClaimFirstCallFindsTheKey: a warm claim does not wait for the
// manager's delivery of its signing key (it is reported provisioned
// first), yet no call of its tenant runs before the key is in: a first
// call that comes before the key waits for it, and is refused as
// unavailable once the agent's --signing-key-wait has passed; the key
// delivered, the next call finds it in /pile/self.key, and the status
// says which key the sandbox holds.
func TestWarmClaimFirstCallFindsTheKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const wait = 500 * time.Millisecond
	c := claimWarmWithKey(t, "warm-key", "warm-key-a", func(o *nodeagent.Options) { o.Agent.SigningKeyWait = wait })
	ns, n, id := c.ns, c.n, c.id
	g.Expect(c.sbx.Status.SigningKey).To(BeNil(), "no key was delivered yet")

	// The first call, before the key: held, then refused, never run
	// without it.
	first := time.Now()
	h, err := n.client.Open(ctx, ns+"/k", id)
	if err == nil {
		res, xerr := n.client.Exec(ctx, ns+"/k", h.ID, agentapi.ExecRequest{Command: "test -e /pile/self.key && echo in || echo missing"})
		g.Expect(xerr).NotTo(HaveOccurred())
		t.Fatalf("the first call ran before the sandbox's signing key was in: the key was %s", strings.TrimSpace(string(res.Stdout)))
	}
	g.Expect(agentapi.CodeOf(err)).To(Equal(agentapi.CodeUnavailable), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("signing key"))
	g.Expect(time.Since(first)).To(BeNumerically(">=", wait), "refused only once the wait has passed")

	// The manager delivers the key: the sandbox runs, so it goes in live,
	// and the next call finds it.
	key := strings.Repeat("cd", 32)
	c.deliver(t, key)
	h, err = n.client.Open(ctx, ns+"/k", id)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := n.client.Exec(ctx, ns+"/k", h.ID, agentapi.ExecRequest{Command: "cat /pile/self.key"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal(key))
	g.Eventually(func(g Gomega) {
		var cur playgroundv1alpha1.Sandbox
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "k"}, &cur)).To(Succeed())
		g.Expect(cur.Status.SigningKey).NotTo(BeNil())
		g.Expect(cur.Status.SigningKey.Fingerprint).To(Equal(signingkey.Fingerprint([]byte(key))))
	}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// TestWarmClaimFirstCallWaitsForTheKey: a first call that comes to a
// warm claim before its signing key waits for it (the node's metrics
// count it waiting), and, the key delivered meanwhile, goes on and finds
// it in /pile/self.key.
func TestWarmClaimFirstCallWaitsForTheKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	addr := freeAddr(t)
	c := claimWarmWithKey(t, "warm-key-wait", "warm-key-b", func(o *nodeagent.Options) {
		o.MetricsBindAddress = addr
		o.Agent.SigningKeyWait = 10 * time.Minute // the delivery ends the wait, not this
	})
	ns, n, id := c.ns, c.n, c.id

	// The tenant's first call: a session, then a read of its key.
	read := make(chan string, 1)
	go func() {
		h, err := n.client.Open(ctx, ns+"/k", id)
		if err != nil {
			read <- "the session was refused: " + err.Error()
			return
		}
		res, err := n.client.Exec(ctx, ns+"/k", h.ID, agentapi.ExecRequest{Command: "cat /pile/self.key 2>&1"})
		if err != nil {
			read <- "the exec failed: " + err.Error()
			return
		}
		read <- string(res.Stdout)
	}()
	waiting := func() (float64, error) {
		select {
		case got := <-read:
			return 0, StopTrying("the first call went on before the signing key was delivered: " + got)
		default:
		}
		m, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			return 0, err
		}
		return m.value(t, "playground_signing_key_waiting_calls", "node", n.name), nil
	}
	g.Eventually(waiting).WithTimeout(timeout).WithPolling(20*time.Millisecond).Should(BeEquivalentTo(1), "the first call waits for the key")

	key := strings.Repeat("ef", 32)
	c.deliver(t, key)
	g.Eventually(read).WithTimeout(timeout).Should(Receive(Equal(key)), "the first call finds the key in")
}

// keyedWarmClaim is sandbox "k" of namespace ns, claimed from node n's
// warm pool of one oci sandbox and waiting for its signing key,
// which the namespace's manager (its ServiceAccount "manager", whom the
// node trusts) delivers.
type keyedWarmClaim struct {
	ns    string
	n     *node
	sbx   *playgroundv1alpha1.Sandbox // as it was once provisioned
	id    string
	token func(sa string, audiences ...string) string
}

// claimWarmWithKey starts node nodeName, its options set by configure,
// with a warm pool of one sandbox, and claims from it sandbox "k" with a
// signing key (Secret k-key), in a new namespace named after prefix.
func claimWarmWithKey(t *testing.T, prefix, nodeName string, configure func(*nodeagent.Options)) *keyedWarmClaim {
	return claimWarmWithKeyOn(t, prefix, nodeName, func(*oci.Options) {}, configure)
}

// claimWarmWithKeyOn is claimWarmWithKey with the oci backend's options
// set by backend too.
func claimWarmWithKeyOn(t *testing.T, prefix, nodeName string, backendOpts func(*oci.Options), configure func(*nodeagent.Options)) *keyedWarmClaim {
	t.Helper()
	g := NewWithT(t)
	c := &keyedWarmClaim{ns: newNamespace(t, prefix)}
	c.token = serviceAccounts(t, c.ns, "manager")
	stateDir := ocitest.StateDir(t)
	bo := oci.Options{StateDir: stateDir, GuestBinary: ocitest.GuestBinary(t), WarmPool: 1, WarmPoolRate: 50, NewID: sandboxids.New}
	backendOpts(&bo)
	be, err := oci.New(bo)
	g.Expect(err).NotTo(HaveOccurred())
	c.n = startNode(t, nodeName, stateDir, "", func(o *nodeagent.Options) {
		o.Backends = []backend.Backend{be}
		o.TrustedManagers = []string{"system:serviceaccount:" + c.ns + ":manager"}
		configure(o)
	})
	g.Eventually(func() int { return be.PoolStats().Ready }).WithTimeout(timeout).WithPolling(50 * time.Millisecond).Should(Equal(1))
	createSandbox(t, c.ns, "k", c.n.name, func(s *playgroundv1alpha1.Sandbox) {
		s.Spec.Pile.SigningKey = &playgroundv1alpha1.SigningKeySource{SecretName: "k-key"}
	})
	c.sbx = waitProvisioned(t, c.ns, "k")
	c.id = idOf(t, c.ns, "k")
	g.Expect(be.Capabilities().StartCounter.Starts(c.id)).To(BeEquivalentTo(1), "the sandbox is the pool's, claimed")
	return c
}

// deliver is the manager's delivery of key to the claim's node.
func (c *keyedWarmClaim) deliver(t *testing.T, key string) {
	t.Helper()
	g := NewWithT(t)
	mc, err := agentapi.NewClient(c.n.endpoint, c.token("manager", agentapi.NodeAudience(c.n.name)), nil)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = mc.SetSigningKey(context.Background(), agentapi.SigningKeyRequest{Namespace: c.ns, Name: "k", UID: string(c.sbx.UID), Key: key})
	g.Expect(err).NotTo(HaveOccurred())
}

// TestWarmClaimFirstKeyGoesInUnpaused: the first signing key of a warm
// claim, whose calls all wait for it, goes in without pausing the
// sandbox (no `runc pause` and `resume`, nor the `runc state` before
// them: three runtime processes a claim in a burst paid on the node's
// cores), since nothing of its tenant's has run in it; the same key
// delivered again is not installed again; a new key, once a call has
// run, pauses the sandbox while the file changes, as before.
func TestWarmClaimFirstKeyGoesInUnpaused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// runc itself, each of its commands written down first.
	runc, err := exec.LookPath("runc")
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	wrapper := filepath.Join(dir, "runc")
	g.Expect(os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$*\" >>"+calls+"\nexec "+runc+" \"$@\"\n"), 0o755)).To(Succeed())
	paused := func() int {
		b, _ := os.ReadFile(calls)
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if slices.Contains(strings.Fields(l), "pause") {
				n++
			}
		}
		return n
	}
	c := claimWarmWithKeyOn(t, "warm-key-unpaused", "warm-key-c", func(o *oci.Options) { o.Runtime = wrapper }, func(o *nodeagent.Options) {
		o.Agent.SigningKeyWait = 10 * time.Minute // the delivery ends the wait, not this
	})
	g.Expect(c.sbx.Status.SigningKey).To(BeNil(), "no key was delivered yet")

	deliver := func(key string) {
		c.deliver(t, key)
		g.Eventually(func(g Gomega) {
			var cur playgroundv1alpha1.Sandbox
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: "k"}, &cur)).To(Succeed())
			g.Expect(cur.Status.SigningKey).NotTo(BeNil())
			g.Expect(cur.Status.SigningKey.Fingerprint).To(Equal(signingkey.Fingerprint([]byte(key))))
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	}
	first := strings.Repeat("ab", 32)
	deliver(first)
	g.Expect(paused()).To(BeZero(), "the first key of a claim that ran nothing went in without pausing it")
	// The same key again (the claim's pass and the delivery bring it at
	// once; a manager delivers again after its restart): in already, it
	// is not written again, nor the sandbox paused.
	deliver(first)
	g.Expect(paused()).To(BeZero(), "a key the sandbox holds already is not installed again")

	// The tenant's call runs, and finds the key; a new key then pauses
	// the sandbox while it goes in.
	h, err := c.n.client.Open(ctx, c.ns+"/k", c.id)
	g.Expect(err).NotTo(HaveOccurred())
	res, err := c.n.client.Exec(ctx, c.ns+"/k", h.ID, agentapi.ExecRequest{Command: "cat /pile/self.key"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal(first))
	second := strings.Repeat("9f", 32)
	deliver(second)
	g.Expect(paused()).To(Equal(1), "a key replaced once the tenant's processes ran pauses the sandbox")
	res, err = c.n.client.Exec(ctx, c.ns+"/k", h.ID, agentapi.ExecRequest{Command: "cat /pile/self.key"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(res.Stdout)).To(Equal(second))
}
