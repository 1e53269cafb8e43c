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
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// snapshotCommand: kubectl playground snapshot TENANT.
func (x *cli) snapshotCommand() *cobra.Command {
	var snapName string
	var expire time.Duration
	cmd := &cobra.Command{
		Use:   "snapshot TENANT",
		Short: "Record the tenant's sandbox as it is now, to fork it later",
		Long: `Create a SandboxSnapshot of the tenant's sandbox and wait until its node has
taken it. It holds the sandbox's files (home, workspace, /tmp) and, on gVisor,
its processes' memory; 'kubectl playground fork' starts new tenants from it.`,
		Example:           "  kubectl playground snapshot alice --name alice-base --expire-after 24h",
		Args:              name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE: x.withClient(func(ctx context.Context, args []string) error {
			return x.snapshot(ctx, args[0], snapName, expire)
		}),
	}
	cmd.Flags().StringVar(&snapName, "name", "", "the SandboxSnapshot's name (default: TENANT-YYYYMMDD-HHMMSS)")
	cmd.Flags().DurationVar(&expire, "expire-after", 0, "delete the snapshot this long after it is taken (at least 1m; default: kept until deleted)")
	return cmd
}

func (x *cli) snapshot(ctx context.Context, tenant, name string, expire time.Duration) error {
	t, s, err := x.tenantAndSandbox(ctx, tenant)
	if err != nil {
		return err
	}
	if s == nil || s.Status.SandboxID == "" {
		return fmt.Errorf("tenant %q has no provisioned sandbox to snapshot: kubectl playground status %s tells why", tenant, tenant)
	}
	if name == "" {
		name = fmt.Sprintf("%s-%s", t.Name, time.Now().UTC().Format("20060102-150405"))
	}
	snap := &playgroundv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name},
		Spec:       playgroundv1alpha1.SandboxSnapshotSpec{SandboxRef: playgroundv1alpha1.LocalObjectReference{Name: s.Name}},
	}
	if expire > 0 {
		snap.Spec.ExpireAfter = &metav1.Duration{Duration: expire}
	}
	if err := x.c.Create(ctx, snap); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("snapshot %q already exists in namespace %s: choose another --name", name, t.Namespace)
		}
		return err
	}
	err = x.waitFor(ctx, "the snapshot to be taken", func(ctx context.Context) (bool, error) {
		if err := x.c.Get(ctx, x.key(name), snap); err != nil {
			return false, err
		}
		if snap.Status.Phase == playgroundv1alpha1.SnapshotFailed {
			why := "see kubectl describe sandboxsnapshot " + name
			if c := meta.FindStatusCondition(snap.Status.Conditions, playgroundv1alpha1.ReadyCondition); c != nil {
				why = c.Message
			}
			return false, fmt.Errorf("the snapshot %s could not be taken: %s", name, why)
		}
		return snap.Status.Phase == playgroundv1alpha1.SnapshotReady, nil
	})
	if err != nil {
		return err
	}
	what := "its files and its processes' memory"
	if !snap.Status.Memory {
		what = "its files only (this sandbox's memory cannot be kept: forks start its processes afresh)"
	}
	fmt.Fprintf(x.out, "sandboxsnapshot/%s taken of tenant %s on node %s: %s, %s\n", name, tenant, snap.Status.NodeName, what, playgroundv1alpha1.ByteSize(snap.Status.SizeBytes))
	fmt.Fprintf(x.out, "Fork it: kubectl playground fork %s NEW-TENANT\n", name)
	return nil
}

// forkCommand: kubectl playground fork SNAPSHOT TENANT...
func (x *cli) forkCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fork SNAPSHOT TENANT...",
		Short: "Create tenants that start from a snapshot",
		Long: `Create one tenant per name, each with the snapshot's tenant's sandbox settings
and spec.sandbox.fromSnapshot: each gets a copy of the snapshot's files (and,
on gVisor, its processes, which go on from where they were), its own token and
its own pile, on the snapshot's node. It waits until they are Ready; their
tokens are printed by 'kubectl playground token show TENANT'.`,
		Example: "  kubectl playground fork alice-base try-1 try-2 try-3",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef(cmd, "fork needs the snapshot's name and at least one new tenant's")
			}
			return nil
		},
		RunE: x.withClient(func(ctx context.Context, args []string) error { return x.fork(ctx, args[0], args[1:]) }),
	}
	return cmd
}

func (x *cli) fork(ctx context.Context, snapName string, tenants []string) error {
	var snap playgroundv1alpha1.SandboxSnapshot
	if err := x.c.Get(ctx, x.key(snapName), &snap); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("no snapshot %q in namespace %s (kubectl get sandboxsnapshots lists them)", snapName, x.namespace)
		}
		return err
	}
	// The source tenant's settings, when it is still there; the snapshot's
	// backend and isolation always, which a fork must have.
	var tmpl playgroundv1alpha1.SandboxTemplate
	var sbx playgroundv1alpha1.Sandbox
	if err := x.c.Get(ctx, x.key(snap.Spec.SandboxRef.Name), &sbx); err == nil {
		tmpl = *sbx.Spec.SandboxTemplate.DeepCopy()
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	tmpl.FromSnapshot = snapName
	if snap.Status.Backend != "" {
		tmpl.Backend = snap.Status.Backend
	}
	if snap.Status.Isolation != "" {
		tmpl.Isolation = snap.Status.Isolation
	}
	for _, name := range tenants {
		t := &playgroundv1alpha1.Tenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: x.namespace, Name: name},
			Spec:       playgroundv1alpha1.TenantSpec{Sandbox: tmpl},
		}
		if err := x.c.Create(ctx, t); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("tenant %q already exists in namespace %s: a fork is a new tenant", name, x.namespace)
			}
			return err
		}
	}
	for _, name := range tenants {
		err := x.waitFor(ctx, "tenant "+name+"'s sandbox to be Ready", func(ctx context.Context) (bool, error) {
			t, err := x.getTenant(ctx, name)
			if err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(t.Status.Conditions, playgroundv1alpha1.ReadyCondition), nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(x.out, "tenant/%s forked from sandboxsnapshot/%s (token: kubectl playground token show %s)\n", name, snapName, name)
	}
	return nil
}
