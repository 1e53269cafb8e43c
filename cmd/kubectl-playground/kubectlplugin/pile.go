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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/mcpgateway"
)

const pileWho = `Who may: a Kubernetes user allowed, in the namespace, to list Sandboxes
(pile list) or to delete the Sandbox of that name (pile delete; the Sandbox
need not exist), who may also list the Leases of --lease-namespace (where the
agents register) and get the ConfigMap playground-agent-ca there. The plugin
presents your kubeconfig's bearer token to each node's agent over TLS, and
the agent asks the API server (a SubjectAccessReview) before it answers.`

func (x *cli) pileCommand() *cobra.Command {
	pile := group(&cobra.Command{
		Use:   "pile",
		Short: "List and remove the piles nodes retain of deleted sandboxes",
		Long: `A tenant's pile outlives its sandbox under reclaim policy Retain (the
default): its node keeps it, with the node's record of which Sandbox it was
(namespace/name), and a Sandbox created again under that name on that node
takes it up. pile list shows what the nodes retain; pile delete removes one,
as a deletion under reclaim policy Delete would have. To delete a tenant and
its pile at once: kubectl playground tenant destroy NAME --purge.`,
	})
	pile.AddCommand(x.pileListCommand(), x.pileDeleteCommand())
	return pile
}

func (x *cli) pileListCommand() *cobra.Command {
	var af agentFlags
	var node string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the piles the nodes retain of deleted Sandboxes in the namespace (-A: in all)",
		Long: `List the piles the nodes retain of Sandboxes that are gone, in the namespace
(-A: in every namespace): the Sandbox's name (a tenant's is the tenant's),
the node and the sandbox ID. Every registered node's agent is asked
(--node: one).

` + pileWho,
		Args: cobra.NoArgs,
		RunE: x.withClient(func(ctx context.Context, _ []string) error {
			ns := x.namespace
			if x.allNamespaces {
				ns = ""
			}
			agents, err := x.nodeAgents(ctx, &af, node)
			if err != nil {
				return err
			}
			piles, failed := retainedPiles(ctx, agents, ns)
			if len(piles) == 0 {
				where := "in namespace " + ns
				if ns == "" {
					where = "in any namespace"
				}
				fmt.Fprintf(x.out, "No node retains a pile of a deleted Sandbox %s.\n", where)
			} else {
				w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "NAMESPACE\tNAME\tNODE\tSANDBOX ID")
				for _, p := range piles {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Namespace, p.Name, p.node, p.SandboxID)
				}
				_ = w.Flush()
			}
			return x.unasked(failed)
		}),
	}
	cmd.Flags().BoolVarP(&x.allNamespaces, "all-namespaces", "A", false, "the piles of every namespace")
	cmd.Flags().StringVar(&node, "node", "", "ask only this node's agent")
	_ = cmd.RegisterFlagCompletionFunc("node", x.completeNodes)
	af.addReach(cmd)
	return cmd
}

func (x *cli) pileDeleteCommand() *cobra.Command {
	var af agentFlags
	var node string
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Remove the pile a node retains of the deleted Sandbox NAME (every file in it)",
		Long: `Remove the pile a node retains of the deleted Sandbox NAME of the namespace (a
tenant's Sandbox has the tenant's name): every file in it, and the node's
record of it, so that a Sandbox created again under that name starts with an
empty pile. The pile's signing key goes with it; the Secret <NAME>-signing-key
that the manager generated stays until you delete it (tenant destroy --purge
does both for a tenant that still exists). Refused while a Sandbox of that
name is bound to the node: delete its Tenant first.

It lists what it will remove and asks for confirmation; --yes does not ask.

` + pileWho,
		Example: `  kubectl playground pile list
  kubectl playground pile delete alice`,
		Args: name("Sandbox"),
		RunE: x.withClient(func(ctx context.Context, args []string) error {
			agents, err := x.nodeAgents(ctx, &af, node)
			if err != nil {
				return err
			}
			return x.deletePiles(ctx, agents, args[0], yes)
		}),
	}
	cmd.Flags().StringVar(&node, "node", "", "ask only this node's agent")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "remove without asking for confirmation")
	_ = cmd.RegisterFlagCompletionFunc("node", x.completeNodes)
	af.addReach(cmd)
	return cmd
}

// deletePiles removes the piles the agents retain of Sandbox name of the
// namespace, once confirmed.
func (x *cli) deletePiles(ctx context.Context, agents []nodeAgent, name string, yes bool) error {
	piles, failed := retainedPiles(ctx, agents, x.namespace)
	piles = slices.DeleteFunc(piles, func(p pileAt) bool { return p.Name != name })
	if len(piles) == 0 {
		if len(failed) > 0 {
			return fmt.Errorf("no node that answered retains a pile of Sandbox %s/%s; %w", x.namespace, name, x.unasked(failed))
		}
		return fmt.Errorf("no node retains a pile of Sandbox %s/%s (kubectl playground pile list shows those that are retained)", x.namespace, name)
	}
	plan := make([]string, len(piles))
	for i, p := range piles {
		plan[i] = p.describe()
	}
	if err := x.confirm(plan, yes); err != nil {
		return err
	}
	var errs []error
	for _, p := range piles {
		res, err := p.client.RemovePile(ctx, p.Namespace, p.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", p.node, err))
			continue
		}
		fmt.Fprintf(x.out, "removed: the pile of Sandbox %s/%s on node %s (sandbox %s), every file in it and the node's record of it\n", p.Namespace, p.Name, res.Node, res.SandboxID)
	}
	if err := x.unasked(failed); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// nodeAgent is a registered node's agent, reached as the caller; err says
// why it cannot be asked.
type nodeAgent struct {
	node   string
	client *agentapi.Client
	err    error
}

// nodeAgents are the agents registered in the lease namespace (only
// node's, when given), reached as the caller: with the kubeconfig's token
// (or --agent-token-file), verified against the agents' CA.
func (x *cli) nodeAgents(ctx context.Context, af *agentFlags, node string) ([]nodeAgent, error) {
	cfg, err := x.restConfig()
	if err != nil {
		return nil, err
	}
	var leases coordinationv1.LeaseList
	if err := x.c.List(ctx, &leases, client.InNamespace(x.leaseNamespace)); err != nil {
		return nil, fmt.Errorf("reading the agents' registrations (the Leases of namespace %s, --lease-namespace): %w", x.leaseNamespace, err)
	}
	var regs []agentlease.Registration
	tlsEndpoint := ""
	for i := range leases.Items {
		reg, err := agentlease.FromLease(&leases.Items[i])
		if err != nil || (node != "" && reg.Node != node) {
			continue // not an agent's registration
		}
		regs = append(regs, reg)
		if strings.HasPrefix(reg.Endpoint, "https://") {
			tlsEndpoint = reg.Endpoint
		}
	}
	if len(regs) == 0 {
		if node != "" {
			return nil, fmt.Errorf("no agent of node %s is registered in namespace %s (--lease-namespace)", node, x.leaseNamespace)
		}
		return nil, fmt.Errorf("no agent is registered in namespace %s (--lease-namespace): no node keeps anything", x.leaseNamespace)
	}
	token, err := af.token(cfg)
	if err != nil {
		return nil, err
	}
	ca, err := af.ca(ctx, cfg, x.leaseNamespace, tlsEndpoint)
	if err != nil {
		return nil, err
	}
	users, err := mcpgateway.NewUserAgents(token, ca, af.cleartext)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(regs, func(a, b agentlease.Registration) int { return strings.Compare(a.Node, b.Node) })
	agents := make([]nodeAgent, 0, len(regs))
	for _, reg := range regs {
		a := nodeAgent{node: reg.Node}
		switch {
		case !reg.Healthy(time.Now()):
			a.err = fmt.Errorf("its agent has not renewed its registration since %s", reg.Renewed.UTC().Format(time.RFC3339))
		case strings.HasPrefix(reg.Endpoint, "http://") && !af.cleartext:
			a.err = fmt.Errorf("its agent serves without TLS (%s), as only playground-dev's does: there, give --agent-cleartext and --agent-token-file .dev/agent-token", reg.Endpoint)
		default:
			a.client, a.err = users.Node(ctx, reg.Node, reg.Endpoint)
		}
		agents = append(agents, a)
	}
	return agents, nil
}

// pileAt is a pile retained on a node, with the client of its agent.
type pileAt struct {
	agentapi.RetainedPile
	node   string
	client *agentapi.Client
}

func (p pileAt) describe() string {
	return fmt.Sprintf("the pile of Sandbox %s/%s on node %s (sandbox %s): every file in it, and the node's record of it", p.Namespace, p.Name, p.node, p.SandboxID)
}

// retainedPiles asks each agent for the piles it retains in namespace
// ("": all), ordered by namespace, name and node; failed says which
// agents could not be asked, and why.
func retainedPiles(ctx context.Context, agents []nodeAgent, namespace string) (piles []pileAt, failed []nodeAgent) {
	for _, a := range agents {
		if a.err != nil {
			failed = append(failed, a)
			continue
		}
		res, err := a.client.Piles(ctx, namespace)
		if err != nil {
			a.err = err
			failed = append(failed, a)
			continue
		}
		for _, p := range res.Piles {
			piles = append(piles, pileAt{RetainedPile: p, node: a.node, client: a.client})
		}
	}
	slices.SortFunc(piles, func(a, b pileAt) int {
		return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.node, b.Namespace+"/"+b.Name+"/"+b.node)
	})
	return piles, failed
}

// unasked says which agents could not be asked, each with why, on the
// error stream, and returns an error when there were any.
func (x *cli) unasked(failed []nodeAgent) error {
	if len(failed) == 0 {
		return nil
	}
	nodes := make([]string, len(failed))
	for i, a := range failed {
		fmt.Fprintf(x.env.ErrOut, "node %s: %v\n", a.node, a.err)
		nodes[i] = a.node
	}
	return fmt.Errorf("the agents of %d node(s) could not be asked (%s): what they retain is not known here", len(failed), strings.Join(nodes, ", "))
}

// errNotConfirmed ends a destructive command that was not confirmed.
var errNotConfirmed = errors.New("nothing was removed: answer y to confirm, or give --yes")

// confirm lists what a destructive command will remove and asks, as
// kubectl delete --interactive does, unless yes: an answer other than y
// or yes, or none (standard input at its end), removes nothing.
func (x *cli) confirm(what []string, yes bool) error {
	if yes {
		return nil
	}
	fmt.Fprintf(x.out, "This removes, for good:\n")
	for _, w := range what {
		fmt.Fprintf(x.out, "  - %s\n", w)
	}
	fmt.Fprint(x.out, "Do you want to continue? (y/N): ")
	line, err := bufio.NewReader(io.LimitReader(x.env.In, 1024)).ReadString('\n')
	if !stdinIsTerminal(x.env.In) {
		fmt.Fprintln(x.out) // a terminal echoed the answer's newline
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	if err != nil && strings.TrimSpace(line) == "" {
		return fmt.Errorf("%w (standard input gave no answer)", errNotConfirmed)
	}
	return errNotConfirmed
}
