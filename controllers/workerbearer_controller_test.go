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
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/bearermirror"
)

// copyOf reads, as an administrator, the gateway's copy of the bearer of
// mapping name of ns.
func copyOf(g Gomega, ns, name string) (string, bool) {
	var s corev1.Secret
	err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: bearermirror.SecretName(bearermirror.ShardOf(ns, name))}, &s)
	if apierrors.IsNotFound(err) {
		return "", false
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Type).To(Equal(bearermirror.SecretType))
	b, ok := s.Data[bearermirror.Key(ns, name)]
	return string(b), ok
}

// copiesHold says whether any copy of any mapping is value.
func copiesHold(g Gomega, value string) bool {
	var list corev1.SecretList
	g.Expect(k8sClient.List(context.Background(), &list, client.InNamespace(agentlease.DefaultNamespace))).To(Succeed())
	for _, s := range list.Items {
		for _, v := range s.Data {
			if string(v) == value {
				return true
			}
		}
	}
	return false
}

// serveMapping creates what makes a service mapping of tenant Ready but
// for its bearer: the Tenant (catalog workers), the Service and a ready
// endpoint; then the mapping, naming the Secret bearer.
func serveMapping(t *testing.T, ns, name, tenant, bearer string) {
	t.Helper()
	newTenant(t, ns, tenant, playgroundv1alpha1.TenantSpec{Catalog: playgroundv1alpha1.CatalogWorkers})
	if err := k8sClient.Create(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "mcp", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}); err != nil {
		t.Fatal(err)
	}
	writeSlice(t, ns, name+"-a", name, discoveryv1.AddressTypeIPv4, "mcp", 8080, endpoint{"10.244.9.1", nil})
	newMapping(t, ns, name, tenant, serviceDest(name, 80, "/mcp"), &playgroundv1alpha1.SecretKeyReference{Name: bearer, Key: "token"})
}

func bearerSecret(ns, name, typ, token string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretType(typ), Data: map[string][]byte{"token": []byte(token)}}
}

// TestWorkerBearerCopies: the manager copies a service worker's bearer,
// and only a valid one from a Secret made for it, into the Secret of the
// lease namespace where the gateway reads it; the mapping is Ready once
// it is there. A rotation in the team's Secret reaches the copy; the copy
// goes with the mapping, with its Secret, with the key, when the bearer
// becomes one the gateway cannot present, and when the mapping names a
// Secret of another type; an edit of the copy is undone; a mapping
// deleted while no manager ran loses its copy when one starts.
func TestWorkerBearerCopies(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	secret := bearerSecret(ns, "worker-bearer", playgroundv1alpha1.WorkerBearerSecretType, "first-bearer\n")
	if err := k8sClient.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	serveMapping(t, ns, "copied", "copied", "worker-bearer")
	hasCopy := func(want string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			b, ok := copyOf(g, ns, "copied")
			g.Expect(ok).To(BeTrue(), "no copy")
			g.Expect(b).To(Equal(want))
			_, c := mappingReady(g, ns, "copied")
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(ContainSubstring("presenting the bearer of Secret worker-bearer"))
		})
	}
	noCopy := func(reason string, contains ...string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			_, ok := copyOf(g, ns, "copied")
			g.Expect(ok).To(BeFalse(), "the copy is still there")
			if reason == "" {
				return
			}
			_, c := mappingReady(g, ns, "copied")
			g.Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"False", reason}), c.Message)
			for _, s := range contains {
				g.Expect(c.Message).To(ContainSubstring(s))
			}
		})
	}
	hasCopy("first-bearer")

	// A rotation in the team's Secret reaches the copy.
	rotated := time.Now()
	secret.Data["token"] = []byte("second-bearer")
	if err := k8sClient.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	hasCopy("second-bearer")
	t.Logf("a rotated bearer reached the gateway's copy %s after the update", time.Since(rotated).Round(time.Millisecond))

	// An edit of the copy is undone.
	eventually(t, func(g Gomega) {
		var s corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: bearermirror.SecretName(bearermirror.ShardOf(ns, "copied"))}, &s)).To(Succeed())
		s.Data[bearermirror.Key(ns, "copied")] = []byte("forged")
		g.Expect(k8sClient.Update(ctx, &s)).To(Succeed())
	})
	hasCopy("second-bearer")

	// A bearer the gateway cannot present: too long, or not one token.
	for _, bad := range []struct{ value, says string }{
		{strings.Repeat("x", bearermirror.MaxBearerBytes+1), "at most 4096"},
		{"two words", "no visible ASCII character"},
	} {
		secret.Data["token"] = []byte(bad.value)
		if err := k8sClient.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		noCopy(ReasonBearerSecretRefused, bad.says)
	}
	secret.Data["token"] = []byte("third-bearer")
	if err := k8sClient.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	hasCopy("third-bearer")

	// The mapping names a Secret of another type: the copy goes, and
	// that Secret's value is copied nowhere.
	if err := k8sClient.Create(ctx, bearerSecret(ns, "plain", string(corev1.SecretTypeOpaque), "plain-value-never-copied")); err != nil {
		t.Fatal(err)
	}
	setRef := func(name string) {
		t.Helper()
		eventually(t, func(g Gomega) {
			wm := getMapping(g, ns, "copied")
			wm.Spec.BearerSecretRef.Name = name
			g.Expect(k8sClient.Update(ctx, wm)).To(Succeed())
		})
	}
	setRef("plain")
	noCopy(ReasonBearerSecretRefused, `is of type "Opaque"`)
	consistently(t, time.Second, func(g Gomega) { g.Expect(copiesHold(g, "plain-value-never-copied")).To(BeFalse()) })
	setRef("worker-bearer")
	hasCopy("third-bearer")

	// The key goes; the Secret goes.
	delete(secret.Data, "token")
	if err := k8sClient.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	noCopy(ReasonBearerSecretNotFound, "has no key token")
	secret = bearerSecret(ns, "worker-bearer", playgroundv1alpha1.WorkerBearerSecretType, "fourth-bearer")
	eventually(t, func(g Gomega) {
		var cur corev1.Secret
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(secret), &cur)).To(Succeed())
		cur.Data = secret.Data
		g.Expect(k8sClient.Update(ctx, &cur)).To(Succeed())
	})
	hasCopy("fourth-bearer")
	if err := k8sClient.Delete(ctx, secret); err != nil {
		t.Fatal(err)
	}
	noCopy(ReasonBearerSecretNotFound, "does not exist")
	if err := k8sClient.Create(ctx, bearerSecret(ns, "worker-bearer", playgroundv1alpha1.WorkerBearerSecretType, "fifth-bearer")); err != nil {
		t.Fatal(err)
	}
	hasCopy("fifth-bearer")

	// The mapping goes.
	if err := k8sClient.Delete(ctx, &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copied"}}); err != nil {
		t.Fatal(err)
	}
	noCopy("")
	g := NewWithT(t)
	for _, b := range []string{"first-bearer", "second-bearer", "third-bearer", "fifth-bearer"} {
		g.Expect(managerLogs()).NotTo(ContainSubstring(b))
	}

	// A mapping deleted while no manager runs loses its copy when one
	// starts.
	newMapping(t, ns, "copied", "copied", serviceDest("copied", 80, "/mcp"), &playgroundv1alpha1.SecretKeyReference{Name: "worker-bearer", Key: "token"})
	hasCopy("fifth-bearer")
	restartManager(t, func() {
		if err := k8sClient.Delete(ctx, &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copied"}}); err != nil {
			t.Fatal(err)
		}
	})
	noCopy("")
}

// TestWorkerBearerCopiesShared: a team fills the shard of the copies where
// another team's mapping falls, with as many mappings of the largest
// bearers as it holds and one more. Its last mapping is left out, and
// says so: Stalled, naming the shard and what to do. The other team's
// mapping is copied all the same, and Ready: the namespace that holds the
// most of a shard gives way, not the newcomer.
func TestWorkerBearerCopiesShared(t *testing.T) {
	ctx := context.Background()
	victimNS, hogNS := newNamespace(t), newNamespace(t)
	// Its key is longer than any filler's: its copy does not fit in the
	// room the fillers leave.
	victim := "the-victim-of-the-hog"
	shard := bearermirror.ShardOf(victimNS, victim)
	inShard := func(prefix string, n int) []string {
		var names []string
		for i := 0; len(names) < n; i++ {
			if name := fmt.Sprintf("%s-%d", prefix, i); bearermirror.ShardOf(hogNS, name) == shard {
				names = append(names, name)
			}
		}
		return names
	}
	big := strings.Repeat("h", bearermirror.MaxBearerBytes)
	if err := k8sClient.Create(ctx, bearerSecret(hogNS, "big", playgroundv1alpha1.WorkerBearerSecretType, big)); err != nil {
		t.Fatal(err)
	}

	// As many of the largest bearers as the shard has room for, after
	// what earlier tests left there.
	var held corev1.Secret
	used := 0
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: bearermirror.SecretName(shard)}, &held); err == nil {
		used = bearermirror.Used(held.Data)
	}
	var fillers []string
	for _, name := range inShard("fill", (bearermirror.MaxShardBytes-used)/bearermirror.EntryBytes(bearermirror.Key(hogNS, "fill-0"), big)) {
		if n := bearermirror.EntryBytes(bearermirror.Key(hogNS, name), big); used+n <= bearermirror.MaxShardBytes {
			fillers, used = append(fillers, name), used+n
		}
	}
	t.Cleanup(func() {
		for _, name := range fillers {
			_ = k8sClient.Delete(ctx, &playgroundv1alpha1.WorkerMapping{ObjectMeta: metav1.ObjectMeta{Namespace: hogNS, Name: name}})
		}
	})
	for i, name := range fillers {
		newMapping(t, hogNS, name, fmt.Sprintf("t-%d", i), serviceDest(fmt.Sprintf("s-%d", i), 80, "/mcp"), &playgroundv1alpha1.SecretKeyReference{Name: "big", Key: "token"})
	}
	eventually(t, func(g Gomega) {
		for _, name := range fillers {
			_, ok := copyOf(g, hogNS, name)
			g.Expect(ok).To(BeTrue(), "%s is not copied", name)
		}
	})

	// One more, Ready but for its bearer, whose name is longer than any
	// filler's: no room.
	last := inShard("the-last-of-the-hog", 1)[0]
	serveMapping(t, hogNS, last, "last", "big")
	eventually(t, func(g Gomega) {
		_, c := mappingReady(g, hogNS, last)
		g.Expect([]string{string(c.Status), c.Reason}).To(Equal([]string{"False", ReasonBearerNotMirrored}), c.Message)
		g.Expect(c.Message).To(ContainSubstring("no room for this mapping's: Secret " + agentlease.DefaultNamespace + "/" + bearermirror.SecretName(shard)))
		g.Expect(c.Message).To(ContainSubstring("this namespace holds the most of it"))
		g.Expect(kstatusOf(g, workerMappingGVK, hogNS, last).Status).To(Equal(status.FailedStatus), "stalled until someone makes room")
		_, ok := copyOf(g, hogNS, last)
		g.Expect(ok).To(BeFalse())
	})

	// The other team's mapping, of a bearer as large, gets in.
	victimBearer := strings.Repeat("v", bearermirror.MaxBearerBytes)
	if err := k8sClient.Create(ctx, bearerSecret(victimNS, "bearer", playgroundv1alpha1.WorkerBearerSecretType, victimBearer)); err != nil {
		t.Fatal(err)
	}
	serveMapping(t, victimNS, victim, "victim", "bearer")
	eventually(t, func(g Gomega) {
		b, ok := copyOf(g, victimNS, victim)
		g.Expect(ok).To(BeTrue(), "the other team's bearer is not copied")
		g.Expect(b == victimBearer).To(BeTrue(), "the other team's copy is not its bearer")
		_, c := mappingReady(g, victimNS, victim)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	})
	var s corev1.Secret
	NewWithT(t).Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: bearermirror.SecretName(shard)}, &s)).To(Succeed())
	t.Logf("%d mappings of %d-byte bearers fill shard %d: it holds %d of %d bytes", len(fillers), len(big), shard, bearermirror.Used(s.Data), bearermirror.MaxShardBytes)
}

// TestBearerCachesHoldOnlyTheirSecrets: the caches of the bearers and of
// their copies, as the manager builds them and with its rights, hold the
// Secrets of type playground.dev/worker-bearer and the copies in the
// lease namespace, and no other Secret.
func TestBearerCachesHoldOnlyTheirSecrets(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(opts cache.Options) cache.Cache {
		opts.Scheme = testScheme
		c, err := cache.New(managerConfig, opts)
		g.Expect(err).NotTo(HaveOccurred())
		go func() { _ = c.Start(ctx) }()
		// As a watch of the kind does in the manager.
		_, err = c.GetInformer(ctx, &corev1.Secret{})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	bearers, copies := start(BearerCacheOptions()), start(CopyCacheOptions(Options{}))

	create := func(ns, name, typ string) *corev1.Secret {
		s := bearerSecret(ns, name, typ, "not a real one")
		g.Expect(k8sClient.Create(ctx, s)).To(Succeed())
		return s
	}
	credential := create(ns, "x-token", playgroundv1alpha1.CredentialSecretType)
	opaque := create(ns, "opaque", string(corev1.SecretTypeOpaque))
	copyElsewhere := create(ns, bearermirror.SecretName(0), string(bearermirror.SecretType))
	bearer := create(ns, "bearer", playgroundv1alpha1.WorkerBearerSecretType)
	// Of no shard's name, so that the manager leaves it alone.
	copied := create(agentlease.DefaultNamespace, "not-a-shard-"+ns, string(bearermirror.SecretType))
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), copied) })
	eventually(t, func(g Gomega) {
		g.Expect(bearers.Get(ctx, client.ObjectKeyFromObject(bearer), &corev1.Secret{})).To(Succeed())
		g.Expect(copies.Get(ctx, client.ObjectKeyFromObject(copied), &corev1.Secret{})).To(Succeed())
	})
	var list corev1.SecretList
	g.Expect(copies.List(ctx, &list)).To(Succeed())
	for _, s := range list.Items {
		g.Expect([]string{s.Namespace, string(s.Type)}).To(Equal([]string{agentlease.DefaultNamespace, string(bearermirror.SecretType)}))
	}
	for _, s := range []*corev1.Secret{credential, opaque, copyElsewhere} {
		err := bearers.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s is in the bearers' cache: %v", s.Name, err)
	}
	var all corev1.SecretList
	g.Expect(bearers.List(ctx, &all)).To(Succeed())
	for _, s := range all.Items {
		g.Expect(string(s.Type)).To(Equal(playgroundv1alpha1.WorkerBearerSecretType), "Secret %s/%s", s.Namespace, s.Name)
	}
}
