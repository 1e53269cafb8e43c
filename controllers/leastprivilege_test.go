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
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

// TestCacheHoldsOnlyCredentialSecrets: the manager's cache, as NewManager
// builds it and with the manager's rights, holds Playground's credential
// Secrets (the tenant label and the credential type) and no other Secret
// of the cluster.
func TestCacheHoldsOnlyCredentialSecrets(t *testing.T) {
	ns := newNamespace(t)
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := CacheOptions(Options{})
	opts.Scheme = testScheme
	c, err := cache.New(managerConfig, opts)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()

	secret := func(name string, labels map[string]string, typ corev1.SecretType) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Type: typ,
			Data: map[string][]byte{"token": []byte("not a real one")}}
		g.Expect(k8sClient.Create(ctx, s)).To(Succeed())
		return s
	}
	label := map[string]string{playgroundv1alpha1.TenantLabel: "x"}
	others := []*corev1.Secret{
		secret("unrelated", nil, corev1.SecretTypeOpaque),
		secret("unlabelled-credential", nil, playgroundv1alpha1.CredentialSecretType),
		secret("labelled-opaque", label, corev1.SecretTypeOpaque),
	}
	credential := secret("x-token", label, playgroundv1alpha1.CredentialSecretType)

	// Created last, the credential Secret is seen after the others would be.
	eventually(t, func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(credential), &corev1.Secret{})).To(Succeed())
	})
	for _, s := range others {
		err := c.Get(ctx, client.ObjectKeyFromObject(s), &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s is cached: %v", s.Name, err)
	}
}

// TestLeaderElectionRights: the manager's Role in the lease namespace is
// enough to be elected and to release the Lease on the way out.
func TestLeaderElectionRights(t *testing.T) {
	g := NewWithT(t)
	const id = LeaderElectionID + "-rights-test"
	m, err := ctrl.NewManager(managerConfig, ctrl.Options{
		Scheme:                        testScheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              id,
		LeaderElectionNamespace:       agentlease.DefaultNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	select {
	case <-m.Elected():
	case err := <-done:
		t.Fatalf("the manager stopped before it was elected: %v", err)
	case <-time.After(eventuallyTimeout):
		cancel()
		t.Fatal("not elected: the manager's Role does not cover leader election")
	}
	cancel()
	g.Expect(<-done).To(Succeed())
	var lease coordinationv1.Lease
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: agentlease.DefaultNamespace, Name: id}, &lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "the Lease was not released")
}
