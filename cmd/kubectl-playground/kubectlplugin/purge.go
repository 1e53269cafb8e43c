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
	"slices"
	"strings"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/mcpgateway"
)

func (x *cli) destroyCommand() *cobra.Command {
	var af agentFlags
	var purge, yes bool
	cmd := &cobra.Command{
		Use:   "destroy NAME",
		Short: "Delete the tenant, its sandbox and its token (--purge: its pile and signing key too)",
		Long: `Delete the tenant, its sandbox and its token, and wait until they are gone.
The pile follows the tenant's reclaim policy: under Retain (the default) its
node keeps it, and the Secret <NAME>-signing-key keeps its signing key, for a
tenant created again under the same name; under Delete both go.

--purge deletes everything of the tenant: its WorkerMappings, the
SandboxSnapshots of its sandbox, the tenant with its sandbox and token, its
generated signing key's Secret, and its pile on its node (removed through
the node's agent, as kubectl playground pile delete does). It lists what it
will remove and asks for confirmation (--yes: does not ask), then says what
it removed. It keeps what is not the tenant's alone, and says so: a signing
key's Secret named by spec.pile.signingKey.secretName (the platform team's)
and the Secrets its egress rules name. A pile kept on another node by an
earlier sandbox of the same name is listed by kubectl playground pile list.

--purge reaches the node's agent as pile delete does: you need the RBAC verb
delete on the tenant's Sandbox (sandboxes.playground.dev of its name), and
your kubeconfig's bearer token is presented to the agent.`,
		Example: `  kubectl playground tenant destroy alice
  kubectl playground tenant destroy alice --purge --yes`,
		Args:              name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE: func(cmd *cobra.Command, args []string) error {
			if yes && !purge {
				return usagef(cmd, "--yes confirms --purge; destroy without --purge asks nothing")
			}
			if err := x.connect(); err != nil {
				return err
			}
			if !purge {
				return x.destroy(cmd.Context(), args[0])
			}
			return x.purge(cmd.Context(), args[0], &af, yes)
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "delete the tenant's pile, signing key and snapshots too: everything of it")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "with --purge: remove without asking for confirmation")
	af.addReach(cmd)
	return cmd
}

// purgePlan is what purge removes, and what it keeps, of one tenant.
type purgePlan struct {
	tenant    *playgroundv1alpha1.Tenant
	sandbox   *playgroundv1alpha1.Sandbox // nil: none
	mappings  []playgroundv1alpha1.WorkerMapping
	snapshots []playgroundv1alpha1.SandboxSnapshot
	keySecret string // the generated key's Secret, "" for none
	agent     *agentapi.Client
	kept      []string
}

// purge deletes a tenant and everything of it, once confirmed.
func (x *cli) purge(ctx context.Context, name string, af *agentFlags, yes bool) error {
	p, err := x.planPurge(ctx, name, af)
	if err != nil {
		return err
	}
	if err := x.confirm(p.removes(), yes); err != nil {
		return err
	}
	removed := func(format string, args ...any) { fmt.Fprintf(x.out, "removed: "+format+"\n", args...) }
	ns := x.namespace
	for i := range p.mappings {
		if err := x.deleteAndWait(ctx, &p.mappings[i]); err != nil {
			return err
		}
		removed("WorkerMapping %s/%s", ns, p.mappings[i].Name)
	}
	for i := range p.snapshots {
		if err := x.deleteAndWait(ctx, &p.snapshots[i]); err != nil {
			return err
		}
		removed("SandboxSnapshot %s/%s and its data on its node", ns, p.snapshots[i].Name)
	}
	if err := x.deleteAndWait(ctx, p.tenant); err != nil {
		return err
	}
	removed("Tenant %s/%s", ns, name)
	if s := p.sandbox; s != nil {
		removed("Sandbox %s/%s%s", ns, s.Name, where(s))
	}
	if err := x.c.Get(ctx, x.key(playgroundv1alpha1.CredentialSecretName(name)), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("the tenant is gone but its token's Secret %s is still there (%v): is the Playground manager running?", playgroundv1alpha1.CredentialSecretName(name), err)
	}
	removed("Secret %s/%s (its token)", ns, playgroundv1alpha1.CredentialSecretName(name))
	if p.keySecret != "" {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.keySecret}}
		if err := x.c.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the signing key's Secret %s: %w", p.keySecret, err)
		}
		removed("Secret %s/%s (its signing key)", ns, p.keySecret)
	}
	if p.agent != nil {
		if err := x.purgePile(ctx, p); err != nil {
			return err
		}
	}
	for _, k := range p.kept {
		fmt.Fprintf(x.out, "kept: %s\n", k)
	}
	fmt.Fprintf(x.out, "tenant/%s purged\n", name)
	return nil
}

// where says where a Sandbox runs, for a message.
func where(s *playgroundv1alpha1.Sandbox) string {
	if s.Spec.NodeName == "" {
		return " (never bound to a node)"
	}
	id := ""
	if s.Status.SandboxID != "" {
		id = ", sandbox " + s.Status.SandboxID
	}
	return fmt.Sprintf(" (node %s%s) and every file of it", s.Spec.NodeName, id)
}

// purgePile removes the pile the tenant's node retains, if it retains
// one: under reclaim policy Delete it went with the sandbox.
func (x *cli) purgePile(ctx context.Context, p *purgePlan) error {
	s := p.sandbox
	var res agentapi.RemovedPile
	var gone bool
	err := x.waitFor(ctx, fmt.Sprintf("node %s's agent to remove the pile", s.Spec.NodeName), func(ctx context.Context) (bool, error) {
		var err error
		res, err = p.agent.RemovePile(ctx, s.Namespace, s.Name)
		switch agentapi.CodeOf(err) {
		case "":
			return true, nil
		case agentapi.CodeNotFound:
			gone = true
			return true, nil
		case agentapi.CodeUnavailable:
			return false, nil // the agent finishes the sandbox's deletion, or restarts
		}
		return false, err
	})
	if err != nil {
		return fmt.Errorf("the tenant is gone, but its pile stays on node %s: %w; remove it with kubectl playground pile delete %s", s.Spec.NodeName, err, s.Name)
	}
	if gone {
		fmt.Fprintf(x.out, "removed: its pile on node %s, with its sandbox (reclaim policy Delete)\n", s.Spec.NodeName)
		return nil
	}
	fmt.Fprintf(x.out, "removed: its pile on node %s (sandbox %s), every file in it and the node's record of it\n", res.Node, res.SandboxID)
	return nil
}

// removes lists what the plan removes, for the confirmation.
func (p *purgePlan) removes() []string {
	t := p.tenant
	var out []string
	for _, m := range p.mappings {
		out = append(out, fmt.Sprintf("WorkerMapping %s/%s", m.Namespace, m.Name))
	}
	for _, s := range p.snapshots {
		out = append(out, fmt.Sprintf("SandboxSnapshot %s/%s and its data on its node", s.Namespace, s.Name))
	}
	out = append(out, fmt.Sprintf("Tenant %s/%s", t.Namespace, t.Name))
	if s := p.sandbox; s != nil {
		out = append(out, fmt.Sprintf("Sandbox %s/%s%s", s.Namespace, s.Name, where(s)))
	}
	out = append(out, fmt.Sprintf("Secret %s/%s (its token)", t.Namespace, playgroundv1alpha1.CredentialSecretName(t.Name)))
	if p.keySecret != "" {
		out = append(out, fmt.Sprintf("Secret %s/%s (its signing key)", t.Namespace, p.keySecret))
	}
	if p.agent != nil {
		out = append(out, fmt.Sprintf("its pile on node %s: every file in it, whatever its reclaim policy, and the node's record of it", p.sandbox.Spec.NodeName))
	}
	return out
}

// planPurge finds everything of the tenant, and reaches its node's agent
// before anything is deleted: a purge that could not remove the pile
// fails before it starts.
func (x *cli) planPurge(ctx context.Context, name string, af *agentFlags) (*purgePlan, error) {
	t, s, err := x.tenantAndSandbox(ctx, name)
	if err != nil {
		return nil, err
	}
	p := &purgePlan{tenant: t, sandbox: s}
	ns := x.namespace
	var wms playgroundv1alpha1.WorkerMappingList
	if err := x.c.List(ctx, &wms, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the WorkerMappings: %w", err)
	}
	for _, m := range wms.Items {
		if m.Spec.TenantRef.Name == name {
			p.mappings = append(p.mappings, m)
		}
	}
	var snaps playgroundv1alpha1.SandboxSnapshotList
	if err := x.c.List(ctx, &snaps, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the SandboxSnapshots: %w", err)
	}
	for _, sn := range snaps.Items {
		if sn.Spec.SandboxRef.Name == sandboxName(t) {
			p.snapshots = append(p.snapshots, sn)
		}
	}
	if named := t.Spec.Pile.SigningKey.SecretName; named != "" {
		p.kept = append(p.kept, fmt.Sprintf("Secret %s/%s: spec.pile.signingKey.secretName names it, a key the platform team manages", ns, named))
	} else {
		p.keySecret = playgroundv1alpha1.SigningKeySecretName(name)
		if err := x.c.Get(ctx, x.key(p.keySecret), &corev1.Secret{}); apierrors.IsNotFound(err) {
			p.keySecret = ""
		}
	}
	var named []string
	for _, r := range t.Spec.Sandbox.Network.Egress {
		if c := r.Credential; c != nil && !slices.Contains(named, c.SecretRef.Name) {
			named = append(named, c.SecretRef.Name)
		}
	}
	for _, n := range named {
		p.kept = append(p.kept, fmt.Sprintf("Secret %s/%s: an egress rule names it, and other tenants may too", ns, n))
	}
	if s == nil || s.Spec.NodeName == "" || s.Status.Endpoint == "" {
		return p, nil // no node holds anything of it
	}
	if p.agent, err = x.sandboxAgent(ctx, s, af); err != nil {
		return nil, fmt.Errorf("nothing was removed: %w", err)
	}
	return p, nil
}

// sandboxAgent reaches the agent of the Sandbox's node as the caller, who
// must be allowed to delete the Sandbox (asked of the API server first).
func (x *cli) sandboxAgent(ctx context.Context, s *playgroundv1alpha1.Sandbox, af *agentFlags) (*agentapi.Client, error) {
	cfg, err := x.restConfig()
	if err != nil {
		return nil, err
	}
	if af.tokenFile == "" {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		attrs := authorizationv1.ResourceAttributes{Namespace: s.Namespace, Verb: "delete", Group: playgroundv1alpha1.GroupVersion.Group, Resource: "sandboxes", Name: s.Name}
		res, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking the API server whether you may delete Sandbox %s/%s: %w", s.Namespace, s.Name, err)
		}
		if !res.Status.Allowed || res.Status.Denied {
			return nil, fmt.Errorf("removing the pile takes the RBAC verb delete on Sandbox %s/%s (sandboxes.playground.dev), which you do not have: ask for it, or destroy without --purge", s.Namespace, s.Name)
		}
	}
	if strings.HasPrefix(s.Status.Endpoint, "http://") && !af.cleartext {
		return nil, fmt.Errorf("the agent of node %s serves without TLS (%s), as only playground-dev's does: there, give --agent-cleartext and --agent-token-file .dev/agent-token", s.Spec.NodeName, s.Status.Endpoint)
	}
	token, err := af.token(cfg)
	if err != nil {
		return nil, err
	}
	ca, err := af.ca(ctx, cfg, x.leaseNamespace, s.Status.Endpoint)
	if err != nil {
		return nil, err
	}
	users, err := mcpgateway.NewUserAgents(token, ca, af.cleartext)
	if err != nil {
		return nil, err
	}
	return users.Node(ctx, s.Spec.NodeName, s.Status.Endpoint)
}

// deleteAndWait deletes obj and waits until it is gone.
func (x *cli) deleteAndWait(ctx context.Context, obj client.Object) error {
	kind := fmt.Sprintf("%T", obj)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if err := x.c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s %s: %w", kind, obj.GetName(), err)
	}
	return x.waitFor(ctx, fmt.Sprintf("%s %s to be deleted", kind, obj.GetName()), func(ctx context.Context) (bool, error) {
		err := x.c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
