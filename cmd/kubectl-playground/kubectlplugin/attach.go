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
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

// attachInfo is what attach -o json|yaml prints.
type attachInfo struct {
	Namespace string `json:"namespace"`
	Tenant    string `json:"tenant"`
	SandboxID string `json:"sandboxID"`
	Node      string `json:"node"`
	Persona   string `json:"persona"`
	Phase     string `json:"phase"`
	Endpoint  string `json:"endpoint,omitempty"`
}

func (x *cli) attachCommand() *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "attach NAME",
		Short: "How to connect an MCP client to the tenant's sandbox",
		Long: `Print the tenant's sandbox (its stable ID, node, persona, phase), the MCP
endpoint and paste-ready client configurations with the tenant's current
token (when you may read its Secret), as tenant create does. -o json|yaml
prints the sandbox's details only, without the token.`,
		Args:              name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := x.checkOutput(cmd); err != nil {
				return err
			}
			return x.withClient(func(ctx context.Context, args []string) error { return x.attach(ctx, args[0], endpoint) })(cmd, args)
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the MCP endpoint clients reach the gateway at (default: $"+EndpointEnv+", else the gateway Service's address inside the cluster)")
	outputFlag(cmd, &x.output, "the sandbox's details")
	return cmd
}

func (x *cli) attach(ctx context.Context, name, endpointFlag string) error {
	t, s, err := x.tenantAndSandbox(ctx, name)
	if err != nil {
		return err
	}
	if s == nil || s.Spec.NodeName == "" || s.Status.SandboxID == "" {
		return fmt.Errorf("tenant %q has no provisioned sandbox yet: kubectl playground status %s tells why", name, name)
	}
	endpoint, note, err := x.mcpEndpoint(ctx, endpointFlag)
	if err != nil {
		return err
	}
	info := attachInfo{
		Namespace: x.namespace, Tenant: name, SandboxID: s.Status.SandboxID, Node: s.Spec.NodeName,
		Persona: cmpOr(s.Spec.Persona, t.Spec.Persona, t.Name), Phase: string(s.Status.Phase), Endpoint: endpoint,
	}
	if x.output != "" {
		return x.print(info)
	}
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "tenant:\t%s/%s\n", info.Namespace, info.Tenant)
	fmt.Fprintf(w, "sandbox:\t%s\n", info.SandboxID)
	fmt.Fprintf(w, "node:\t%s\n", info.Node)
	fmt.Fprintf(w, "persona:\t%s\n", info.Persona)
	fmt.Fprintf(w, "phase:\t%s\n", info.Phase)
	if err := w.Flush(); err != nil {
		return err
	}
	token, err := x.waitForToken(ctx, "the token the tenant's status describes", name, func(*playgroundv1alpha1.Tenant) bool { return true })
	switch {
	case apierrors.IsForbidden(err):
		token = ""
		fmt.Fprintf(x.out, "\nYou may not read the tenant's Secret %s, so its token is not shown.\n", playgroundv1alpha1.CredentialSecretName(name))
	case err != nil:
		return err
	}
	fmt.Fprintln(x.out)
	printClients(x.out, x.namespace, name, endpoint, note, token)
	return nil
}

func (x *cli) nodeCommand() *cobra.Command {
	node := group(&cobra.Command{Use: "node", Short: "Nodes whose agents are gone"})
	node.AddCommand(&cobra.Command{
		Use:   "forget NODE",
		Short: "Release the deleted sandboxes and snapshots of a node that is gone (their files on it are lost)",
		Long: `Release the deleted sandboxes and snapshots of a node that will not come
back: remove the agent's finalizer from every deleted Sandbox bound to NODE
and every deleted SandboxSnapshot kept there, in any namespace, as its agent
would once it had freed their disk. Their files on that node are lost.
Refused while the node's agent renews its registration.`,
		Args:              name("node"),
		ValidArgsFunction: x.completeNodes,
		RunE:              x.withClient(func(ctx context.Context, args []string) error { return x.forgetNode(ctx, args[0]) }),
	})
	return node
}

// forgetNode releases the Sandboxes of a node that will not come back: the
// agent's finalizer on those being deleted is removed, as the agent would
// once it had destroyed them; their files on the node are lost. It refuses
// while the node's agent renews its registration, and lists the node's
// sandboxes that are not being deleted (delete them or their Tenants first).
func (x *cli) forgetNode(ctx context.Context, node string) error {
	var lease coordinationv1.Lease
	err := x.c.Get(ctx, client.ObjectKey{Namespace: x.leaseNamespace, Name: agentlease.Name(node)}, &lease)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading the registration of node %s: %w", node, err)
	default:
		if reg, err := agentlease.FromLease(&lease); err == nil && reg.Healthy(time.Now()) {
			return fmt.Errorf("the agent of node %s renewed its registration at %s: it is running, and destroys its deleted sandboxes itself; forget only a node whose agent is gone",
				node, reg.Renewed.UTC().Format(time.RFC3339))
		}
	}
	var list playgroundv1alpha1.SandboxList
	if err := x.c.List(ctx, &list, client.MatchingFields{playgroundv1alpha1.SandboxNodeNameField: node}); err != nil {
		return fmt.Errorf("listing the sandboxes of node %s: %w", node, err)
	}
	released, waiting := 0, 0
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.NodeName != node {
			continue
		}
		if s.DeletionTimestamp.IsZero() {
			waiting++
			fmt.Fprintf(x.out, "sandbox %s/%s is bound to node %s and not being deleted: delete its Tenant (or the Sandbox), then run this again\n", s.Namespace, s.Name, node)
			continue
		}
		if !controllerutil.ContainsFinalizer(s, playgroundv1alpha1.SandboxFinalizer) {
			continue
		}
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(s, playgroundv1alpha1.SandboxFinalizer)
		if err := x.c.Patch(ctx, s, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing sandbox %s/%s: %w", s.Namespace, s.Name, err)
		}
		released++
		fmt.Fprintf(x.out, "sandbox %s/%s released: its files on node %s are lost\n", s.Namespace, s.Name, node)
	}
	fmt.Fprintf(x.out, "node %s: %d sandboxes released, %d still bound and not being deleted\n", node, released, waiting)
	return x.forgetSnapshots(ctx, node)
}

// forgetSnapshots releases the deleted SandboxSnapshots kept on a node that
// is gone, as forgetNode does its Sandboxes, and names those not being
// deleted (their forks can no longer start: delete them).
func (x *cli) forgetSnapshots(ctx context.Context, node string) error {
	var list playgroundv1alpha1.SandboxSnapshotList
	if err := x.c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing the snapshots: %w", err)
	}
	released, kept := 0, 0
	for i := range list.Items {
		s := &list.Items[i]
		if s.Status.NodeName != node {
			continue
		}
		if s.DeletionTimestamp.IsZero() {
			kept++
			fmt.Fprintf(x.out, "snapshot %s/%s is kept on node %s: no fork of it can start; delete it, then run this again\n", s.Namespace, s.Name, node)
			continue
		}
		if !controllerutil.ContainsFinalizer(s, playgroundv1alpha1.SnapshotFinalizer) {
			continue
		}
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(s, playgroundv1alpha1.SnapshotFinalizer)
		if err := x.c.Patch(ctx, s, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing snapshot %s/%s: %w", s.Namespace, s.Name, err)
		}
		released++
		fmt.Fprintf(x.out, "snapshot %s/%s released: its data on node %s is lost\n", s.Namespace, s.Name, node)
	}
	if released+kept > 0 {
		fmt.Fprintf(x.out, "node %s: %d snapshots released, %d kept there and not being deleted\n", node, released, kept)
	}
	return nil
}
