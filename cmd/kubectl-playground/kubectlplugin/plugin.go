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

// Package kubectlplugin is kubectl-playground: the everyday tenant
// operations as one command each, doing what kubectl and YAML do, faster.
package kubectlplugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/scheme"
)

const usage = `Usage: kubectl playground [flags] <command>

Commands:
  tenant create NAME        create a tenant and print its token (shown once)
  tenant token reset NAME   mint a new token; the old one stops working
  tenant suspend NAME       refuse the tenant's token and stop its sandbox's
                            processes; its files stay
  tenant resume NAME        accept the same token again; the sandbox starts
                            again over its files
  tenant restart NAME       kill every process in the tenant's sandbox and
                            start it again over its files (lifts a halt of
                            background jobs: condition JobsAdmitted)
  tenant destroy NAME       delete the tenant, its sandbox and its token
  attach NAME               print the tenant's sandbox ID, node and persona
  status NAME               conditions of the tenant, its worker mapping
                            (catalog workers: endpoint, restarts, last
                            exit), its sandbox and its node, and its
                            sandbox's faculty bundles (state, fingerprint,
                            the build on its node)
  logs NAME                 the end of the output of the tenant's sandbox
                            worker (catalog workers), as its agent last
                            read it, and how it last ended
  node forget NODE          release the deleted sandboxes of a node that is gone
                            (their files on it are lost); refused while its
                            agent renews its registration

Flags:
  -n, --namespace NS        namespace (default: the kubeconfig context's)
  --kubeconfig PATH         kubeconfig file (default: $KUBECONFIG or ~/.kube/config)
  --context NAME            kubeconfig context
  --timeout DURATION        how long to wait for the cluster (default 60s)
  --persona NAME            tenant create: the persona (default: the name)
  --catalog sandbox|workers tenant create: the MCP catalog (default sandbox)
  --lease-namespace NS      where agents register (default playground-system)
`

// cli is one invocation: flags, a client and where to print.
type cli struct {
	c              client.Client
	namespace      string
	timeout        time.Duration
	persona        string
	catalog        string
	leaseNamespace string
	out            io.Writer
}

// Run parses args and runs the command. c is injected by tests; nil means
// a client from the kubeconfig.
func Run(ctx context.Context, args []string, out, errOut io.Writer, c client.Client) error {
	fs := flag.NewFlagSet("kubectl playground", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprint(errOut, usage) }
	var kubeconfig, kubeContext string
	x := &cli{out: out}
	fs.StringVar(&x.namespace, "namespace", "", "")
	fs.StringVar(&x.namespace, "n", "", "")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&kubeContext, "context", "", "")
	fs.DurationVar(&x.timeout, "timeout", 60*time.Second, "")
	fs.StringVar(&x.persona, "persona", "", "")
	fs.StringVar(&x.catalog, "catalog", string(playgroundv1alpha1.CatalogSandbox), "")
	fs.StringVar(&x.leaseNamespace, "lease-namespace", agentlease.DefaultNamespace, "")
	if err := fs.Parse(interleave(args)); err != nil {
		return err
	}
	words := fs.Args()

	if c == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
		cfg, err := loader.ClientConfig()
		if err != nil {
			return fmt.Errorf("loading the kubeconfig: %w", err)
		}
		if x.namespace == "" {
			if x.namespace, _, err = loader.Namespace(); err != nil {
				return err
			}
		}
		if c, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
			return err
		}
	}
	if x.namespace == "" {
		x.namespace = "default"
	}
	x.c = c

	cmd, name, err := parseCommand(words)
	if err != nil {
		fmt.Fprint(errOut, usage)
		return err
	}
	switch cmd {
	case "tenant create":
		return x.create(ctx, name)
	case "tenant token reset":
		return x.resetToken(ctx, name)
	case "tenant suspend":
		return x.setSuspended(ctx, name, true)
	case "tenant resume":
		return x.setSuspended(ctx, name, false)
	case "tenant restart":
		return x.restart(ctx, name)
	case "tenant destroy":
		return x.destroy(ctx, name)
	case "attach":
		return x.attach(ctx, name)
	case "status":
		return x.status(ctx, name)
	case "logs":
		return x.logs(ctx, name)
	case "node forget":
		return x.forgetNode(ctx, name)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// interleave moves flags before the positional words, so that flags may
// follow the command as kubectl users write them.
func interleave(args []string) []string {
	var flags, words []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			words = append(words, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-"):
			flags = append(flags, a)
			if !strings.Contains(a, "=") && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			words = append(words, a)
		}
	}
	return append(flags, words...)
}

// parseCommand splits words into a known command and the tenant's name.
func parseCommand(words []string) (string, string, error) {
	commands := []string{"tenant create", "tenant token reset", "tenant suspend", "tenant resume", "tenant restart", "tenant destroy", "attach", "status", "logs", "node forget"}
	for _, c := range commands {
		n := len(strings.Fields(c))
		if len(words) == n+1 && strings.Join(words[:n], " ") == c {
			return c, words[n], nil
		}
	}
	if len(words) == 0 {
		return "", "", errors.New("no command given")
	}
	return "", "", fmt.Errorf("%q is not a command (or lacks the tenant's or node's name)", strings.Join(words, " "))
}

func (x *cli) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: x.namespace, Name: name}
}

func (x *cli) getTenant(ctx context.Context, name string) (*playgroundv1alpha1.Tenant, error) {
	var t playgroundv1alpha1.Tenant
	if err := x.c.Get(ctx, x.key(name), &t); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("no tenant %q in namespace %s", name, x.namespace)
		}
		return nil, err
	}
	return &t, nil
}

// waitFor polls until done reports true, an error, or the timeout.
func (x *cli) waitFor(ctx context.Context, what string, done func(ctx context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, x.timeout, true, done)
	if wait.Interrupted(err) {
		return fmt.Errorf("timed out after %s waiting for %s: is the Playground manager running? (kubectl playground status shows the conditions)", x.timeout, what)
	}
	return err
}

// tokenOf reads the tenant's current token and checks it against the hash
// the manager published in the Tenant's status, which is what the gateway
// authenticates against, so that a token printed is one the gateway
// accepts. (A manager older than that hash published only the fingerprint.)
func (x *cli) tokenOf(ctx context.Context, t *playgroundv1alpha1.Tenant) (string, bool, error) {
	ref, creds := t.Status.Credentials.SecretRef, t.Status.Credentials
	if ref == nil || creds.Fingerprint == "" {
		return "", false, nil
	}
	var s corev1.Secret
	if err := x.c.Get(ctx, x.key(ref.Name), &s); err != nil {
		return "", false, client.IgnoreNotFound(err)
	}
	token := string(s.Data[playgroundv1alpha1.CredentialTokenKey])
	if token == "" {
		return "", false, nil
	}
	hash := playgroundv1alpha1.TokenSHA256(token)
	if creds.TokenSHA256 != "" {
		return token, hash == creds.TokenSHA256, nil
	}
	return token, hash[:16] == creds.Fingerprint, nil
}

func (x *cli) create(ctx context.Context, name string) error {
	t := &playgroundv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: x.namespace, Name: name},
		Spec:       playgroundv1alpha1.TenantSpec{Persona: x.persona, Catalog: playgroundv1alpha1.Catalog(x.catalog)},
	}
	if err := x.c.Create(ctx, t); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("tenant %q already exists in namespace %s: its token was shown when it was created; reset it with: kubectl playground tenant token reset %s", name, x.namespace, name)
		}
		return err
	}
	token, err := x.waitForToken(ctx, "the tenant's token", name, func(*playgroundv1alpha1.Tenant) bool { return true })
	if err != nil {
		return err
	}
	fmt.Fprintf(x.out, "tenant/%s created in namespace %s\ntoken: %s\n(the token is shown once; it is kept in Secret %s)\n",
		name, x.namespace, token, playgroundv1alpha1.CredentialSecretName(name))
	return nil
}

func (x *cli) resetToken(ctx context.Context, name string) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	old := t.Status.Credentials.Fingerprint
	patch := client.MergeFrom(t.DeepCopy())
	t.Spec.Credentials.RotationRequest = strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := x.c.Patch(ctx, t, patch); err != nil {
		return err
	}
	want := t.Spec.Credentials.RotationRequest
	token, err := x.waitForToken(ctx, "the new token", name, func(t *playgroundv1alpha1.Tenant) bool {
		return t.Status.Credentials.RotationRequest == want && t.Status.Credentials.Fingerprint != old
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(x.out, "tenant/%s has a new token; the old one is refused from now on\ntoken: %s\n", name, token)
	return nil
}

// waitForToken waits until the tenant's status passes ready and its token
// can be read, and returns the token.
func (x *cli) waitForToken(ctx context.Context, what, name string, ready func(*playgroundv1alpha1.Tenant) bool) (string, error) {
	var token string
	err := x.waitFor(ctx, what, func(ctx context.Context) (bool, error) {
		t, err := x.getTenant(ctx, name)
		if err != nil || !ready(t) {
			return false, err
		}
		tok, ok, err := x.tokenOf(ctx, t)
		token = tok
		return ok, err
	})
	return token, err
}

func (x *cli) setSuspended(ctx context.Context, name string, suspended bool) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(t.DeepCopy())
	t.Spec.Suspended = suspended
	if err := x.c.Patch(ctx, t, patch); err != nil {
		return err
	}
	want := metav1.ConditionTrue
	verb := "resumed: its token works again"
	if suspended {
		want, verb = metav1.ConditionFalse, "suspended: its token is refused and its sandbox's processes stop; its files stay"
	}
	err = x.waitFor(ctx, "the tenant's credentials to follow", func(ctx context.Context) (bool, error) {
		t, err := x.getTenant(ctx, name)
		if err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.CredentialsReadyCondition)
		return c != nil && c.Status == want && c.ObservedGeneration == t.Generation, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(x.out, "tenant/%s %s\n", name, verb)
	return nil
}

// restart asks the node's agent to restart the tenant's sandbox and waits
// until it has.
func (x *cli) restart(ctx context.Context, name string) error {
	_, s, err := x.tenantAndSandbox(ctx, name)
	if err != nil {
		return err
	}
	if s == nil || s.Status.SandboxID == "" {
		return fmt.Errorf("tenant %q has no provisioned sandbox to restart: kubectl playground status %s tells why", name, name)
	}
	patch := client.MergeFrom(s.DeepCopy())
	s.Spec.RestartRequest = time.Now().UTC().Format(time.RFC3339Nano)
	if err := x.c.Patch(ctx, s, patch); err != nil {
		return err
	}
	want := s.Spec.RestartRequest
	err = x.waitFor(ctx, "the sandbox's agent to restart it", func(ctx context.Context) (bool, error) {
		var cur playgroundv1alpha1.Sandbox
		if err := x.c.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
			return false, err
		}
		return cur.Status.RestartRequest == want, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(x.out, "tenant/%s: sandbox %s restarted on node %s; every process in it was killed, its files are kept\n", name, s.Status.SandboxID, s.Spec.NodeName)
	return nil
}

func (x *cli) destroy(ctx context.Context, name string) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	if err := x.c.Delete(ctx, t); client.IgnoreNotFound(err) != nil {
		return err
	}
	err = x.waitFor(ctx, "the tenant and its sandbox to be destroyed", func(ctx context.Context) (bool, error) {
		_, err := x.getTenant(ctx, name)
		return err != nil && strings.HasPrefix(err.Error(), "no tenant"), nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(x.out, "tenant/%s destroyed: its sandbox and token are gone (the pile follows the reclaim policy, %s)\n",
		name, reclaimOf(t))
	return nil
}

func reclaimOf(t *playgroundv1alpha1.Tenant) playgroundv1alpha1.ReclaimPolicy {
	if p := t.Spec.Sandbox.Storage.ReclaimPolicy; p != "" {
		return p
	}
	return playgroundv1alpha1.ReclaimRetain
}

// tenantAndSandbox gets the tenant and its Sandbox (nil when it has none).
func (x *cli) tenantAndSandbox(ctx context.Context, name string) (*playgroundv1alpha1.Tenant, *playgroundv1alpha1.Sandbox, error) {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	s, err := x.sandboxOf(ctx, t)
	return t, s, err
}

func (x *cli) sandboxOf(ctx context.Context, t *playgroundv1alpha1.Tenant) (*playgroundv1alpha1.Sandbox, error) {
	name := t.Name
	if t.Status.SandboxRef != nil {
		name = t.Status.SandboxRef.Name
	}
	var s playgroundv1alpha1.Sandbox
	if err := x.c.Get(ctx, x.key(name), &s); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &s, nil
}

func (x *cli) attach(ctx context.Context, name string) error {
	t, s, err := x.tenantAndSandbox(ctx, name)
	if err != nil {
		return err
	}
	if s == nil || s.Spec.NodeName == "" || s.Status.SandboxID == "" {
		return fmt.Errorf("tenant %q has no provisioned sandbox yet: kubectl playground status %s tells why", name, name)
	}
	persona := cmpOr(s.Spec.Persona, t.Spec.Persona, t.Name)
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "tenant:\t%s/%s\n", x.namespace, name)
	fmt.Fprintf(w, "sandbox:\t%s\n", s.Status.SandboxID)
	fmt.Fprintf(w, "node:\t%s\n", s.Spec.NodeName)
	fmt.Fprintf(w, "persona:\t%s\n", persona)
	fmt.Fprintf(w, "phase:\t%s\n", s.Status.Phase)
	return w.Flush()
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func (x *cli) status(ctx context.Context, name string) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "OBJECT\tCONDITION\tSTATUS\tREASON\tMESSAGE")
	printConditions(w, "tenant/"+t.Name, t.Status.Conditions)
	if t.Spec.Catalog == playgroundv1alpha1.CatalogWorkers {
		if err := x.printWorkers(ctx, w, t); err != nil {
			return err
		}
	}
	s, err := x.sandboxOf(ctx, t)
	if err != nil {
		return err
	}
	if s == nil {
		fmt.Fprintf(w, "sandbox/%s\t-\t-\tNotFound\tthe manager has not created it yet\n", t.Name)
		return w.Flush()
	}
	printConditions(w, "sandbox/"+s.Name, s.Status.Conditions)
	if s.Spec.NodeName != "" {
		var lease coordinationv1.Lease
		err := x.c.Get(ctx, client.ObjectKey{Namespace: x.leaseNamespace, Name: agentlease.Name(s.Spec.NodeName)}, &lease)
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(w, "node/%s\tRegistered\tFalse\tNoAgent\tno agent registration in namespace %s\n", s.Spec.NodeName, x.leaseNamespace)
		case err != nil:
			fmt.Fprintf(w, "node/%s\tRegistered\tUnknown\tError\t%v\n", s.Spec.NodeName, err)
		default:
			reg, err := agentlease.FromLease(&lease)
			healthy := err == nil && reg.Healthy(time.Now())
			status, reason, msg := "True", "AgentHealthy", "renewed "+reg.Renewed.UTC().Format(time.RFC3339)+" at "+reg.Endpoint
			if !healthy {
				status, reason = "False", "AgentUnavailable"
			}
			if reg.AdmissionHalted != "" {
				msg += "; jobs not admitted: " + reg.AdmissionHalted
			}
			fmt.Fprintf(w, "node/%s\tRegistered\t%s\t%s\t%s\n", s.Spec.NodeName, status, reason, msg)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return x.printFaculties(ctx, name, s)
}

// printFaculties lists the faculty bundles of the tenant's sandbox: what
// the agent installed (state and fingerprint, from the sandbox's
// status.faculties), the build of each bundle on the sandbox's node (from
// the bundle's status.nodes), and what to do when they differ. Fingerprints
// are shortened to 12 hex digits, as in the conditions' messages; `kubectl
// get fb -o wide` shows them whole.
func (x *cli) printFaculties(ctx context.Context, tenant string, s *playgroundv1alpha1.Sandbox) error {
	installed := map[string]playgroundv1alpha1.FacultyInstallStatus{}
	var names []string
	for _, f := range s.Spec.Faculties {
		names = append(names, f.Name)
	}
	for _, f := range s.Status.Faculties {
		installed[f.Name] = f
		if !slices.Contains(names, f.Name) {
			names = append(names, f.Name) // no longer listed, still reported
		}
	}
	if len(names) == 0 {
		return nil
	}
	fmt.Fprintln(x.out)
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FACULTY\tSTATE\tFINGERPRINT\tNODE BUILD\tMESSAGE")
	for _, name := range names {
		inst, reported := installed[name]
		state, fp, msg := string(inst.State), shortFingerprint(inst.Fingerprint), inst.Message
		if !reported {
			state, msg = "-", "not reported by the node's agent yet"
		}
		var fb playgroundv1alpha1.FacultyBundle
		nodeBuild := "-"
		switch err := x.c.Get(ctx, x.key(name), &fb); {
		case apierrors.IsNotFound(err):
			if msg == "" {
				msg = fmt.Sprintf("no FacultyBundle %q in namespace %s", name, x.namespace)
			}
		case err != nil:
			msg = fmt.Sprintf("reading FacultyBundle %s: %v", name, err)
		default:
			nodeBuild = nodeBuildOf(&fb, s.Spec.NodeName)
			if e := entryOf(&fb, s.Spec.NodeName); e != nil {
				switch {
				case reported && e.Ready && e.Fingerprint != "" && e.Fingerprint != inst.Fingerprint:
					// The agent says the sandbox waits for a restart; say how.
					msg = fmt.Sprintf("build %s is ready on node %s: kubectl playground tenant restart %s switches the sandbox to it", shortFingerprint(e.Fingerprint), e.NodeName, tenant)
				case msg == "" && !e.Ready:
					msg = e.Message
				}
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", name, state, fp, nodeBuild, oneLine(msg))
	}
	return w.Flush()
}

// printWorkers prints the WorkerMappings of a tenant whose catalog is
// workers: their conditions, where they forward, and the worker process
// as its agent reports it.
func (x *cli) printWorkers(ctx context.Context, w io.Writer, t *playgroundv1alpha1.Tenant) error {
	var list playgroundv1alpha1.WorkerMappingList
	if err := x.c.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return fmt.Errorf("listing the worker mappings of namespace %s: %w", t.Namespace, err)
	}
	found := false
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.TenantRef.Name != t.Name {
			continue
		}
		found = true
		object := "workermapping/" + m.Name
		printConditions(w, object, m.Status.Conditions)
		endpoint := cmpOr(m.Status.Endpoint, "not resolved yet")
		if m.Spec.Destination.Service != nil {
			endpoint += fmt.Sprintf(" (%d ready endpoints)", len(m.Status.ReadyEndpoints))
		}
		fmt.Fprintf(w, "%s\tEndpoint\t-\t-\t%s\n", object, endpoint)
		if m.Spec.Destination.Sandbox == nil {
			continue
		}
		p := m.Status.Worker
		if p == nil {
			fmt.Fprintf(w, "%s\tWorker\tUnknown\tNotReported\tthe sandbox's agent has not reported the worker process yet\n", object)
			continue
		}
		status, reason := "False", "Exited"
		if p.Running {
			status, reason = "True", "Running"
		}
		msg := fmt.Sprintf("restarts %d", p.Restarts)
		if p.LastExit != "" {
			msg += "; last exit: " + p.LastExit
			if p.LastExitTime != nil {
				msg += " at " + p.LastExitTime.UTC().Format(time.RFC3339)
			}
		}
		fmt.Fprintf(w, "%s\tWorker\t%s\t%s\t%s\n", object, status, reason, msg)
	}
	if !found {
		fmt.Fprintf(w, "workermapping/-\t-\t-\tNoMapping\tno WorkerMapping in namespace %s has spec.tenantRef.name: %s, so the gateway has nowhere to forward the tenant\n", t.Namespace, t.Name)
	}
	return nil
}

// logs prints the end of the output of the tenant's sandbox worker that
// its agent keeps in the mapping's status, and how the worker last ended.
func (x *cli) logs(ctx context.Context, name string) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	var list playgroundv1alpha1.WorkerMappingList
	if err := x.c.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return fmt.Errorf("listing the worker mappings of namespace %s: %w", t.Namespace, err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if m.Spec.TenantRef.Name != t.Name {
			continue
		}
		if m.Spec.Destination.Sandbox == nil {
			return fmt.Errorf("tenant %s's worker is the Service %s: read its logs where it runs (kubectl logs)", name, m.Spec.Destination.Service.Name)
		}
		p := m.Status.Worker
		if p == nil {
			return fmt.Errorf("the agent of tenant %s's sandbox has not reported its worker yet (see kubectl playground status %s)", name, name)
		}
		fmt.Fprint(x.out, p.Output)
		if p.Output != "" && !strings.HasSuffix(p.Output, "\n") {
			fmt.Fprintln(x.out)
		}
		state := "running"
		if !p.Running {
			state = "not running"
		}
		fmt.Fprintf(x.out, "# workermapping/%s: %s, %d restarts", m.Name, state, p.Restarts)
		if p.LastExit != "" {
			fmt.Fprintf(x.out, ", last exit: %s", p.LastExit)
			if p.LastExitTime != nil {
				fmt.Fprintf(x.out, " at %s", p.LastExitTime.UTC().Format(time.RFC3339))
			}
		}
		if p.Error != "" {
			fmt.Fprintf(x.out, "; cannot start: %s", p.Error)
		}
		fmt.Fprintln(x.out)
		return nil
	}
	return fmt.Errorf("tenant %s has no WorkerMapping in namespace %s: only workers tenants have a worker to show", name, t.Namespace)
}

// entryOf is the bundle's status.nodes entry of node, or nil.
func entryOf(fb *playgroundv1alpha1.FacultyBundle, node string) *playgroundv1alpha1.BundleNodeStatus {
	for i := range fb.Status.Nodes {
		if node != "" && fb.Status.Nodes[i].NodeName == node {
			return &fb.Status.Nodes[i]
		}
	}
	return nil
}

// nodeBuildOf says what the bundle's build on node is: its fingerprint,
// and whether it is ready.
func nodeBuildOf(fb *playgroundv1alpha1.FacultyBundle, node string) string {
	e := entryOf(fb, node)
	switch {
	case e == nil:
		return "none yet"
	case e.Ready:
		return shortFingerprint(e.Fingerprint) + " ready"
	case e.Fingerprint != "":
		return shortFingerprint(e.Fingerprint) + " not ready"
	default:
		return "not ready"
	}
}

func shortFingerprint(fp string) string {
	switch {
	case fp == "":
		return "-"
	case len(fp) > 12:
		return fp[:12]
	default:
		return fp
	}
}

// oneLine keeps a message (a build log's tail, say) on its table row.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
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
	return nil
}

func printConditions(w io.Writer, object string, conds []metav1.Condition) {
	if len(conds) == 0 {
		fmt.Fprintf(w, "%s\t-\t-\t-\tno conditions reported yet\n", object)
		return
	}
	sorted := append([]metav1.Condition(nil), conds...)
	sort.Slice(sorted, func(i, j int) bool {
		// Ready first: it is the summary.
		if (sorted[i].Type == playgroundv1alpha1.ReadyCondition) != (sorted[j].Type == playgroundv1alpha1.ReadyCondition) {
			return sorted[i].Type == playgroundv1alpha1.ReadyCondition
		}
		return sorted[i].Type < sorted[j].Type
	})
	for _, c := range sorted {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", object, c.Type, c.Status, c.Reason, c.Message)
	}
}
