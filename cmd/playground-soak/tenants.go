//go:build linux

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

package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// kind is what a tenant does to the node.
type kind string

const (
	good kind = "good" // a client that checks every answer
	// The hostile: each its own attack, on small limits.
	pidsBomb  kind = "pids"   // a held job that takes every PID of its sandbox
	memHog    kind = "memory" // jobs that run out of memory, again and again
	flood     kind = "flood"  // a job writing without end, nobody reading; 4 MiB execs
	diskFill  kind = "disk"   // a writable layer filled to ENOSPC, again and again
	heldJobs  kind = "held"   // its 8 active jobs never end; a ninth is refused
	egressNet kind = "egress" // a sandbox with a network namespace and an nftables table
)

// hostileKinds are the tenants beside the good ones; each can be deleted
// and created again by a fault.
var hostileKinds = []kind{pidsBomb, memHog, flood, diskFill, heldJobs, egressNet}

func tenantName(k kind, i int) string {
	if k == good {
		return fmt.Sprintf("good-%d", i)
	}
	if k == egressNet {
		return "churn-egress"
	}
	return "hostile-" + string(k)
}

// tenantSpec is k's Tenant. Every pile goes with its sandbox (Delete), so
// that nothing of a deleted tenant may stay on the node; the hostile ones
// get a tenth or a fifth of a core, so that their busy loops leave the
// node's two cores to the others.
func tenantSpec(k kind) playgroundv1alpha1.TenantSpec {
	q := resource.MustParse
	qp := func(s string) *resource.Quantity { v := q(s); return &v }
	spec := playgroundv1alpha1.TenantSpec{Persona: "soak-" + string(k)}
	sb := &spec.Sandbox
	spec.Pile.ReclaimPolicy = playgroundv1alpha1.ReclaimDelete
	switch k {
	case good:
		sb.Resources = playgroundv1alpha1.SandboxResources{Memory: qp("256Mi"), PIDs: ptr.To[int64](256)}
	case pidsBomb:
		sb.Resources = playgroundv1alpha1.SandboxResources{CPU: qp("100m"), Memory: qp("128Mi"), PIDs: ptr.To[int64](32)}
	case memHog:
		sb.Resources = playgroundv1alpha1.SandboxResources{CPU: qp("200m"), Memory: qp("64Mi")}
	case flood:
		sb.Resources = playgroundv1alpha1.SandboxResources{CPU: qp("200m"), Memory: qp("128Mi")}
	case diskFill:
		sb.Resources = playgroundv1alpha1.SandboxResources{CPU: qp("200m"), Memory: qp("128Mi")}
		sb.Storage.Size, sb.Storage.Inodes = qp("48Mi"), ptr.To[int64](4096)
	case heldJobs:
		sb.Resources = playgroundv1alpha1.SandboxResources{CPU: qp("200m"), Memory: qp("128Mi")}
	case egressNet:
		sb.Resources = playgroundv1alpha1.SandboxResources{CPU: qp("200m"), Memory: qp("128Mi")}
		// TEST-NET-1: documentation addresses, reached by nothing.
		sb.Network = playgroundv1alpha1.SandboxNetwork{Mode: playgroundv1alpha1.NetworkEgress,
			Egress: []playgroundv1alpha1.EgressRule{{CIDR: "192.0.2.0/24", Ports: []int32{443}}}}
	}
	return spec
}

// createTenant creates the tenant, retrying while the API server is away.
func (s *system) createTenant(ctx context.Context, name string, k kind) error {
	t := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: tenantSpec(k)}
	return retryAPI(ctx, time.Minute, func() error {
		err := s.c.Create(ctx, t.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// deleteTenant deletes the tenant (its Sandbox follows).
func (s *system) deleteTenant(ctx context.Context, name string) error {
	t := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return retryAPI(ctx, time.Minute, func() error { return client.IgnoreNotFound(s.c.Delete(ctx, t)) })
}

// retryAPI calls fn until it succeeds, ctx ends or bound passes.
func retryAPI(ctx context.Context, bound time.Duration, fn func() error) error {
	deadline := time.Now().Add(bound)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// tenantReady says whether the tenant and its Sandbox are Ready, and if not
// why; with its token and sandbox ID once they are.
func (s *system) tenantReady(ctx context.Context, name string) (token, sandboxID, why string) {
	var t playgroundv1alpha1.Tenant
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &t); err != nil {
		return "", "", err.Error()
	}
	if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
		if c == nil {
			return "", "", "the Tenant has no Ready condition yet"
		}
		return "", "", "Tenant " + c.Reason + ": " + c.Message
	}
	var sbx playgroundv1alpha1.Sandbox
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &sbx); err != nil {
		return "", "", err.Error()
	}
	if !meta.IsStatusConditionTrue(sbx.Status.Conditions, playgroundv1alpha1.ReadyCondition) {
		return "", "", "the Sandbox is not Ready (phase " + string(sbx.Status.Phase) + ")"
	}
	var secret corev1.Secret
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: playgroundv1alpha1.CredentialSecretName(name)}, &secret); err != nil {
		return "", "", err.Error()
	}
	return string(secret.Data[playgroundv1alpha1.CredentialTokenKey]), sbx.Status.SandboxID, ""
}

// waitTenant waits up to bound for the tenant to be Ready and returns its
// token and sandbox ID.
func (s *system) waitTenant(ctx context.Context, name string, bound time.Duration) (token, sandboxID string, err error) {
	deadline := time.Now().Add(bound)
	for {
		token, id, why := s.tenantReady(ctx, name)
		if why == "" {
			return token, id, nil
		}
		if time.Now().After(deadline) {
			return "", "", fmt.Errorf("tenant %s is not Ready after %s: %s", name, bound, why)
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitGone waits up to bound for the tenant and its Sandbox to be gone.
func (s *system) waitGone(ctx context.Context, name string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	key := client.ObjectKey{Namespace: namespace, Name: name}
	for {
		terr := s.c.Get(ctx, key, &playgroundv1alpha1.Tenant{})
		var sbx playgroundv1alpha1.Sandbox
		serr := s.c.Get(ctx, key, &sbx)
		if apierrors.IsNotFound(terr) && apierrors.IsNotFound(serr) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tenant %s is not gone %s after its deletion: Tenant: %v, Sandbox: %v (phase %s, finalizers %v)",
				name, bound, errOrExists(terr), errOrExists(serr), sbx.Status.Phase, sbx.Finalizers)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func errOrExists(err error) string {
	if err == nil {
		return "still there"
	}
	return err.Error()
}
