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
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// withClient runs fn once the API server's client is made.
func (x *cli) withClient(fn func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := x.connect(); err != nil {
			return err
		}
		return fn(cmd.Context(), args)
	}
}

func (x *cli) tenantCommand() *cobra.Command {
	tenant := group(&cobra.Command{
		Use:   "tenant",
		Short: "Create, list, suspend, resume, restart and destroy tenants",
	})
	one := func(use, short, long string, fn func(ctx context.Context, name string) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " NAME", Short: short, Long: long, Args: name("tenant"),
			ValidArgsFunction: x.completeTenants,
			RunE:              x.withClient(func(ctx context.Context, args []string) error { return fn(ctx, args[0]) }),
		}
	}
	tokenGroup := group(&cobra.Command{Use: "token", Short: "Print or reset a tenant's token (as the top-level token command)"})
	tokenGroup.AddCommand(x.tokenShowCommand(), x.tokenResetCommand())
	tenant.AddCommand(
		x.listCommand(),
		x.createCommand(),
		tokenGroup,
		x.suspendCommand(true),
		x.suspendCommand(false),
		one("restart", "Kill every process in the tenant's sandbox and start it again over its files",
			"Kill every process in the tenant's sandbox and start it again over its files.\n"+
				"This lifts a halt of background jobs (condition JobsAdmitted) and switches the\n"+
				"sandbox to the newest build of its faculty bundles.", x.restart),
		one("resolve-image", "Resolve the tenant's image tag again, to the digest it names now",
			"Have the manager resolve the tenant's image tag (spec.sandbox.image) again and\n"+
				"pin the digest it names now in the Sandbox's status.image: a tag moved since is\n"+
				"picked up without changing the spec. It sets the annotation\n"+
				playgroundv1alpha1.ResolveImageAnnotation+" on the Tenant, waits for the answer and\n"+
				"prints the digest (the sandbox runs it from its next start).", x.resolveImage),
		x.destroyCommand(),
	)
	return tenant
}

// suspendCommand is suspend (or resume), under tenant and at the top
// level beside snapshot and fork: one command, so one text.
func (x *cli) suspendCommand(suspend bool) *cobra.Command {
	use, short, long := "resume", "Resume a suspended tenant: the same token works again, and its sandbox goes on",
		`Clear the Tenant's spec.suspended: the gateway accepts the same token again,
and the sandbox goes on: one suspended with its memory (gVisor) where its
processes and jobs were, another started again over its files (its processes
and jobs were ended by the suspension).`
	if suspend {
		use, short, long = "suspend", "Suspend a tenant: its token is refused, its sandbox put aside with its files",
			`Set the Tenant's spec.suspended: the gateway refuses its token from the next
request on, and its sandbox is put aside: checkpointed with its memory where the
node can (gVisor), stopped otherwise (its processes and jobs end); its files stay.
resume undoes it.`
	}
	return &cobra.Command{
		Use: use + " NAME", Short: short, Long: long, Args: name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE:              x.withClient(func(ctx context.Context, args []string) error { return x.setSuspended(ctx, args[0], suspend) }),
	}
}

func (x *cli) tokenCommand() *cobra.Command {
	token := group(&cobra.Command{Use: "token", Short: "Print or reset a tenant's token"})
	token.AddCommand(x.tokenShowCommand(), x.tokenResetCommand())
	return token
}

func (x *cli) tokenShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show NAME",
		Short: "Print the tenant's current token",
		Long: `Print the tenant's current token, from its credential Secret (<name>-token),
once the Tenant's status describes it: during a rotation the Secret holds the
new token a moment before the gateway accepts it. Needs get on that Secret.`,
		Args:              name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE: x.withClient(func(ctx context.Context, args []string) error {
			if _, err := x.getTenant(ctx, args[0]); err != nil {
				return err
			}
			token, err := x.waitForToken(ctx, "the token the tenant's status describes", args[0], func(*playgroundv1alpha1.Tenant) bool { return true })
			if err != nil {
				return err
			}
			fmt.Fprintln(x.out, token)
			return nil
		}),
	}
}

func (x *cli) tokenResetCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "reset NAME",
		Short:             "Mint a new token; the old one stops working",
		Args:              name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE:              x.withClient(func(ctx context.Context, args []string) error { return x.resetToken(ctx, args[0]) }),
	}
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
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("timed out after %s waiting for %s: is the Playground manager running? (kubectl playground status shows the conditions)", x.timeout, what)
	}
	return err
}

// tokenOf reads the tenant's current token and checks it against the hash
// the manager published in the Tenant's status, which is what the gateway
// authenticates against, so that a token printed is one the gateway
// accepts.
func (x *cli) tokenOf(ctx context.Context, t *playgroundv1alpha1.Tenant) (string, bool, error) {
	ref, creds := t.Status.Credentials.SecretRef, t.Status.Credentials
	if ref == nil || creds.TokenSHA256 == "" {
		return "", false, nil
	}
	var s corev1.Secret
	if err := x.c.Get(ctx, x.key(ref.Name), &s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("reading the tenant's credential Secret %s: %w", ref.Name, err)
	}
	token := string(s.Data[playgroundv1alpha1.CredentialTokenKey])
	if token == "" {
		return "", false, nil
	}
	return token, playgroundv1alpha1.TokenSHA256(token) == creds.TokenSHA256, nil
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

// createFlags are tenant create's: the Tenant's spec, and what to do with it.
// Each field of the spec a platform team sets when it creates a tenant has
// a flag (TestCreateFlagsCoverTheSpec holds it).
type createFlags struct {
	persona, catalog, tools, backend, isolation string
	cpu, memory, storage                        string
	pids, inodes                                int64
	faculties                                   []string
	nodeSelector                                []string
	network                                     string
	egress                                      []string
	idleSuspend                                 time.Duration
	idleMode                                    string
	idleWithJobs                                bool
	env                                         []string
	loginScript                                 string
	fromSnapshot                                string
	cpuSeconds                                  int64
	usagePeriod                                 time.Duration
	suspended                                   bool
	dryRun                                      string
	wait                                        bool
	endpoint                                    string

	// The pile's settings (spec.pile).
	pileSize, reclaimPolicy, sharedPile, signingKey string
	pileInodes                                      int64

	// The sandbox's image (spec.sandbox.image).
	image, imagePullPolicy string
	imagePullSecrets       []string
}

func (x *cli) createCommand() *cobra.Command {
	var f createFlags
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a tenant and print its token and client configurations",
		Long: `Create a tenant, wait for the manager to mint its token, and print the token
with paste-ready configurations of MCP clients (Claude Code, Cursor, VS Code,
and the stdio gateway). The token stays in the Secret <name>-token:
'kubectl playground token show NAME' prints it again.

The MCP endpoint is what --endpoint or $PLAYGROUND_ENDPOINT says (the URL
clients reach the gateway at: an Ingress, a load balancer, a port-forward);
without either, the gateway's Service in --lease-namespace gives its address
inside the cluster.

--dry-run prints the Tenant instead of creating it (with -o yaml, YAML to
keep in Git); --dry-run=server has the API server check it first. Without
--dry-run, -o json|yaml prints the created Tenant instead of the token and
the configurations.`,
		Example: `  kubectl playground tenant create alice --isolation gvisor --memory 2Gi --wait
  kubectl playground tenant create alice --tools extended --idle-suspend 15m --idle-mode Pause
  kubectl playground tenant create alice --faculty tools --dry-run -o yaml > alice.yaml`,
		Args:              name("tenant"),
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := x.checkOutput(cmd); err != nil {
				return err
			}
			ns, err := x.ns()
			if err != nil {
				return err
			}
			t, err := f.tenant(cmd, ns, args[0])
			if err != nil {
				return err
			}
			if f.dryRun == "client" {
				return x.printCreated(t, "(dry run)")
			}
			if err := x.connect(); err != nil {
				return err
			}
			return x.create(cmd.Context(), t, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.persona, "persona", "", "the identity the tenant's shells present (default: the name)")
	fl.StringVar(&f.catalog, "catalog", "", "the MCP catalog: sandbox (the eight tools; the default) or workers (its own worker, through a WorkerMapping)")
	fl.StringVar(&f.tools, "tools", "", "with catalog sandbox, the tool set: standard (the eight tools; the default) or extended (terminals, input to running jobs, files in ranges, and job_input, job_resize, job_screen and job_list)")
	fl.StringVar(&f.backend, "backend", "", "the sandbox's backend: oci (the default), vm, jail or lima, as the nodes' agents offer")
	fl.StringVar(&f.isolation, "isolation", "", "on backend oci: container (the default) or gvisor")
	fl.StringVar(&f.cpu, "cpu", "", `CPU cores the sandbox may use, e.g. "500m" or "2" (default 1)`)
	fl.StringVar(&f.memory, "memory", "", `memory the sandbox may use, e.g. "512Mi" (default 1Gi)`)
	fl.StringVar(&f.storage, "storage", "", `size of the sandbox's writable layer (home, workspace, /tmp), e.g. "8Gi" (default 4Gi)`)
	fl.Int64Var(&f.pids, "pids", 0, "the most processes and threads the sandbox may hold at once, 16 to 1048576 (default 1024)")
	fl.Int64Var(&f.inodes, "inodes", 0, "the most files the writable layer may hold, at least 256 (default 262144)")
	fl.StringArrayVar(&f.faculties, "faculty", nil, "a FacultyBundle of the namespace to install on the sandbox's PATH (repeatable)")
	fl.StringArrayVar(&f.nodeSelector, "node-selector", nil, "a node label KEY=VALUE the sandbox's node must have (repeatable), as a Pod's nodeSelector")
	fl.StringVar(&f.network, "network", "", "none (loopback only; the default) or egress (to the --egress list only)")
	fl.StringArrayVar(&f.egress, "egress", nil, "with --network egress: what the sandbox may reach, a network or a host name, CIDR[:PORT,...] or HOST[:PORT,...] (repeatable), e.g. 10.0.0.0/8:443, 2001:db8::/32:443, pypi.org:443, *.githubusercontent.com:443")
	fl.DurationVar(&f.idleSuspend, "idle-suspend", 0, `suspend the sandbox after this long without a tool call, e.g. "15m" (at least 10s); the next call resumes it (default: never)`)
	fl.StringVar(&f.pileSize, "pile-size", "", `size of the tenant's pile, its append-only storage at /pile, e.g. "1Gi" (default 512Mi, at least 32Mi)`)
	fl.Int64Var(&f.pileInodes, "pile-inodes", 0, "the most files and directories the pile may hold (default 4096, at least 256)")
	fl.StringVar(&f.reclaimPolicy, "reclaim-policy", "", "whether the pile outlives the sandbox: Retain (kept on its node; the default) or Delete (removed with the sandbox)")
	fl.StringVar(&f.sharedPile, "shared-pile", "", "a FacultyBundle of the namespace mounted read-only at /pile/shared")
	fl.StringVar(&f.signingKey, "signing-key-secret", "", "a Secret of type playground.dev/signing-key holding the pile's signing key under self.key (default: the manager generates one)")
	fl.StringVar(&f.idleMode, "idle-mode", "", "with --idle-suspend, how: Suspend (the default: its memory and CPU freed, kept on disk where the node can) or Pause (frozen, its memory kept in RAM, resumed in milliseconds)")
	fl.BoolVar(&f.idleWithJobs, "idle-with-running-jobs", false, "with --idle-suspend, suspend it even while background jobs run (where its memory is not kept, they end)")
	fl.StringArrayVar(&f.env, "env", nil, "an environment variable NAME=VALUE that login shells start with (repeatable)")
	fl.StringVar(&f.loginScript, "login-script", "", "shell code that login shells source before each command, e.g. 'alias ll=\"ls -l\"'")
	fl.StringVar(&f.fromSnapshot, "from-snapshot", "", "a SandboxSnapshot of the namespace the sandbox starts from (its files, and its memory where the snapshot holds it)")
	fl.Int64Var(&f.cpuSeconds, "usage-cpu-seconds", 0, "the CPU-seconds the sandbox may use per --usage-period; spent, it is frozen until the period resets (default: no limit)")
	fl.DurationVar(&f.usagePeriod, "usage-period", 0, "with --usage-cpu-seconds, the period, at least 10s (default 24h)")
	fl.StringVar(&f.image, "image", "", "an OCI image the sandbox runs as its system, its registry first, e.g. docker.io/library/python:3.12; the manager pins its tag's digest (docs/images.md; default: the node's own system)")
	fl.StringArrayVar(&f.imagePullSecrets, "image-pull-secret", nil, "with --image, a kubernetes.io/dockerconfigjson Secret of the namespace to pull it with (repeatable, at most 8)")
	fl.StringVar(&f.imagePullPolicy, "image-pull-policy", "", "with --image: IfNotPresent (the default: a node uses the copy it holds) or Always (the node asks the registry at every start)")
	fl.BoolVar(&f.suspended, "suspended", false, "create the tenant suspended: its token is refused and its sandbox stopped until tenant resume")
	fl.StringVar(&f.dryRun, "dry-run", "none", "client: print the Tenant without creating it; server: have the API server check it too, without creating it")
	fl.Lookup("dry-run").NoOptDefVal = "client"
	fl.BoolVar(&f.wait, "wait", false, "wait until the tenant's sandbox is Ready (up to --timeout) before printing how to connect")
	fl.StringVar(&f.endpoint, "endpoint", "", "the MCP endpoint clients reach the gateway at (default: $"+EndpointEnv+", else the gateway Service's address inside the cluster)")
	outputFlag(cmd, &x.output, "the Tenant")
	for flag, values := range map[string][]string{
		"catalog":           {string(playgroundv1alpha1.CatalogSandbox), string(playgroundv1alpha1.CatalogWorkers)},
		"tools":             {string(playgroundv1alpha1.ToolSetStandard), string(playgroundv1alpha1.ToolSetExtended)},
		"idle-mode":         {string(playgroundv1alpha1.IdleModeSuspend), string(playgroundv1alpha1.IdleModePause)},
		"reclaim-policy":    {string(playgroundv1alpha1.ReclaimRetain), string(playgroundv1alpha1.ReclaimDelete)},
		"backend":           {string(playgroundv1alpha1.BackendOCI), string(playgroundv1alpha1.BackendVM), string(playgroundv1alpha1.BackendJail), string(playgroundv1alpha1.BackendLima)},
		"isolation":         {string(playgroundv1alpha1.IsolationContainer), string(playgroundv1alpha1.IsolationGVisor)},
		"network":           {string(playgroundv1alpha1.NetworkNone), string(playgroundv1alpha1.NetworkEgress)},
		"dry-run":           {"none", "client", "server"},
		"image-pull-policy": {string(playgroundv1alpha1.PullIfNotPresent), string(playgroundv1alpha1.PullAlways)},
	} {
		_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	_ = cmd.RegisterFlagCompletionFunc("faculty", x.completeFaculties)
	_ = cmd.RegisterFlagCompletionFunc("shared-pile", x.completeFaculties)
	return cmd
}

// sandboxImage sets spec.sandbox.image from --image and its companions.
func (f *createFlags) sandboxImage(cmd *cobra.Command, sb *playgroundv1alpha1.SandboxTemplate) error {
	if f.image == "" {
		if len(f.imagePullSecrets) > 0 || f.imagePullPolicy != "" {
			return usagef(cmd, "--image-pull-secret and --image-pull-policy go with --image")
		}
		return nil
	}
	switch {
	case strings.Contains(f.image, "://"):
		return usagef(cmd, "--image %q: no scheme: write registry.example.com/team/image:tag", f.image)
	case !strings.Contains(f.image, "/"):
		return usagef(cmd, "--image %q: name its registry too, e.g. docker.io/library/%s", f.image, f.image)
	case len(f.imagePullSecrets) > playgroundv1alpha1.MaxImagePullSecrets:
		return usagef(cmd, "--image-pull-secret: at most %d", playgroundv1alpha1.MaxImagePullSecrets)
	}
	img := &playgroundv1alpha1.SandboxImage{Reference: f.image, PullPolicy: playgroundv1alpha1.ImagePullPolicy(f.imagePullPolicy)}
	for _, n := range f.imagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return usagef(cmd, "--image-pull-secret %q: %s", n, strings.Join(errs, "; "))
		}
		img.PullSecrets = append(img.PullSecrets, playgroundv1alpha1.LocalObjectReference{Name: n})
	}
	sb.Image = img
	return nil
}

// oneOf checks a flag's value against the API's enum.
func oneOf(cmd *cobra.Command, flag, value string, allowed ...string) error {
	if value == "" || slices.Contains(allowed, value) {
		return nil
	}
	return usagef(cmd, "--%s %q: want %s", flag, value, strings.Join(allowed, ", "))
}

// tenant is the Tenant the flags describe; mistakes the API server would
// refuse are refused here first, each naming its flag.
func (f *createFlags) tenant(cmd *cobra.Command, ns, name string) (*playgroundv1alpha1.Tenant, error) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, usagef(cmd, "tenant name %q: %s", name, strings.Join(errs, "; "))
	}
	for _, c := range []error{
		oneOf(cmd, "dry-run", f.dryRun, "none", "client", "server"),
		oneOf(cmd, "catalog", f.catalog, string(playgroundv1alpha1.CatalogSandbox), string(playgroundv1alpha1.CatalogWorkers)),
		oneOf(cmd, "tools", f.tools, string(playgroundv1alpha1.ToolSetStandard), string(playgroundv1alpha1.ToolSetExtended)),
		oneOf(cmd, "idle-mode", f.idleMode, string(playgroundv1alpha1.IdleModeSuspend), string(playgroundv1alpha1.IdleModePause)),
		oneOf(cmd, "reclaim-policy", f.reclaimPolicy, string(playgroundv1alpha1.ReclaimRetain), string(playgroundv1alpha1.ReclaimDelete)),
		oneOf(cmd, "backend", f.backend, string(playgroundv1alpha1.BackendOCI), string(playgroundv1alpha1.BackendVM), string(playgroundv1alpha1.BackendJail), string(playgroundv1alpha1.BackendLima)),
		oneOf(cmd, "isolation", f.isolation, string(playgroundv1alpha1.IsolationContainer), string(playgroundv1alpha1.IsolationGVisor)),
		oneOf(cmd, "network", f.network, string(playgroundv1alpha1.NetworkNone), string(playgroundv1alpha1.NetworkEgress)),
		oneOf(cmd, "image-pull-policy", f.imagePullPolicy, string(playgroundv1alpha1.PullIfNotPresent), string(playgroundv1alpha1.PullAlways)),
	} {
		if c != nil {
			return nil, c
		}
	}
	if f.isolation != "" && f.backend != "" && f.backend != string(playgroundv1alpha1.BackendOCI) {
		return nil, usagef(cmd, "--isolation is a choice of backend oci; backend %s takes none", f.backend)
	}
	if f.tools != "" && f.catalog == string(playgroundv1alpha1.CatalogWorkers) {
		return nil, usagef(cmd, "--tools is the tool set of catalog sandbox; a workers tenant is served its worker's own tools")
	}
	t := &playgroundv1alpha1.Tenant{
		TypeMeta:   metav1.TypeMeta{APIVersion: playgroundv1alpha1.GroupVersion.String(), Kind: "Tenant"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: playgroundv1alpha1.TenantSpec{
			Persona: f.persona, Catalog: playgroundv1alpha1.Catalog(f.catalog), Tools: playgroundv1alpha1.ToolSet(f.tools),
			Suspended: f.suspended,
			Sandbox: playgroundv1alpha1.SandboxTemplate{
				Backend:   playgroundv1alpha1.BackendClass(f.backend),
				Isolation: playgroundv1alpha1.Isolation(f.isolation),
			},
		},
	}
	sb := &t.Spec.Sandbox
	if err := f.sandboxImage(cmd, sb); err != nil {
		return nil, err
	}
	if err := f.more(cmd, t); err != nil {
		return nil, err
	}
	for _, q := range []struct {
		flag, value string
		to          **resource.Quantity
	}{{"cpu", f.cpu, &sb.Resources.CPU}, {"memory", f.memory, &sb.Resources.Memory}, {"storage", f.storage, &sb.Storage.Size}, {"pile-size", f.pileSize, &t.Spec.Pile.Size}} {
		if q.value == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() <= 0 {
			return nil, usagef(cmd, "--%s %q: want a positive quantity, such as 500m, 2, 512Mi or 4Gi", q.flag, q.value)
		}
		*q.to = &v
	}
	pile := &t.Spec.Pile
	switch {
	case f.pileInodes < 0 || (f.pileInodes > 0 && f.pileInodes < 256):
		return nil, usagef(cmd, "--pile-inodes %d: want at least 256", f.pileInodes)
	case f.pileInodes > 0:
		pile.Inodes = &f.pileInodes
	}
	pile.ReclaimPolicy = playgroundv1alpha1.ReclaimPolicy(f.reclaimPolicy)
	for _, ref := range []struct {
		flag, value string
		set         func(string)
	}{
		{"shared-pile", f.sharedPile, func(n string) { pile.Shared = &playgroundv1alpha1.FacultyBundleReference{Name: n} }},
		{"signing-key-secret", f.signingKey, func(n string) { pile.SigningKey.SecretName = n }},
	} {
		if ref.value == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(ref.value); len(errs) > 0 {
			return nil, usagef(cmd, "--%s %q: %s", ref.flag, ref.value, strings.Join(errs, "; "))
		}
		ref.set(ref.value)
	}
	for _, fb := range f.faculties {
		if errs := validation.IsDNS1123Subdomain(fb); len(errs) > 0 {
			return nil, usagef(cmd, "--faculty %q: %s", fb, strings.Join(errs, "; "))
		}
		if fb == f.sharedPile {
			return nil, usagef(cmd, "--faculty %q is the --shared-pile too: a FacultyBundle is either a faculty or the shared pile, not both", fb)
		}
		if slices.ContainsFunc(sb.Faculties, func(r playgroundv1alpha1.FacultyBundleReference) bool { return r.Name == fb }) {
			return nil, usagef(cmd, "--faculty %q is given twice", fb)
		}
		sb.Faculties = append(sb.Faculties, playgroundv1alpha1.FacultyBundleReference{Name: fb})
	}
	for _, kv := range f.nodeSelector {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usagef(cmd, "--node-selector %q: want a node label KEY=VALUE", kv)
		}
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return nil, usagef(cmd, "--node-selector %q: %s", kv, strings.Join(errs, "; "))
		}
		if sb.NodeSelector == nil {
			sb.NodeSelector = map[string]string{}
		}
		sb.NodeSelector[k] = v
	}
	mode := playgroundv1alpha1.NetworkMode(f.network)
	switch {
	case mode == "" && len(f.egress) > 0:
		mode = playgroundv1alpha1.NetworkEgress
	case mode == playgroundv1alpha1.NetworkEgress && len(f.egress) == 0:
		return nil, usagef(cmd, "--network egress needs what the sandbox may reach: --egress CIDR[:PORT,...] or HOST[:PORT,...]")
	case mode == playgroundv1alpha1.NetworkNone && len(f.egress) > 0:
		return nil, usagef(cmd, "--egress is for --network egress, not none")
	}
	switch {
	case f.idleSuspend < 0 || (f.idleSuspend > 0 && f.idleSuspend < 10*time.Second):
		return nil, usagef(cmd, "--idle-suspend %s: want at least 10s", f.idleSuspend)
	case f.idleSuspend > 0:
		sb.IdleSuspend = &playgroundv1alpha1.IdleSuspend{After: metav1.Duration{Duration: f.idleSuspend},
			Mode: playgroundv1alpha1.IdleMode(f.idleMode), WithRunningJobs: f.idleWithJobs}
	case f.idleMode != "" || f.idleWithJobs:
		return nil, usagef(cmd, "--idle-mode and --idle-with-running-jobs say how the sandbox is suspended after --idle-suspend: give it too")
	}
	sb.Network.Mode = mode
	for _, e := range f.egress {
		rule, err := egressRule(e)
		if err != nil {
			return nil, usagef(cmd, "--egress %q: %v", e, err)
		}
		sb.Network.Egress = append(sb.Network.Egress, rule)
	}
	return t, nil
}

// more sets the fields of t's spec beyond the sandbox's size and network:
// its limits of processes and files, its login profile, where
// it starts from and its usage limit.
func (f *createFlags) more(cmd *cobra.Command, t *playgroundv1alpha1.Tenant) error {
	sb := &t.Spec.Sandbox
	for _, n := range []struct {
		flag     string
		value    int64
		min, max int64
		to       **int64
	}{
		{"pids", f.pids, 16, 1048576, &sb.Resources.PIDs},
		{"inodes", f.inodes, 256, 4294967295, &sb.Storage.Inodes},
	} {
		switch {
		case n.value == 0:
		case n.value < n.min || n.value > n.max:
			return usagef(cmd, "--%s %d: want %d to %d", n.flag, n.value, n.min, n.max)
		default:
			*n.to = ptr.To(n.value)
		}
	}
	if f.fromSnapshot != "" {
		if errs := validation.IsDNS1123Subdomain(f.fromSnapshot); len(errs) > 0 {
			return usagef(cmd, "--from-snapshot %q: %s", f.fromSnapshot, strings.Join(errs, "; "))
		}
	}
	sb.FromSnapshot = f.fromSnapshot
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !envName.MatchString(k) {
			return usagef(cmd, "--env %q: want NAME=VALUE, NAME of letters, digits and underscores, not starting with a digit", kv)
		}
		if slices.ContainsFunc(sb.LoginProfile.Env, func(e playgroundv1alpha1.EnvVar) bool { return e.Name == k }) {
			return usagef(cmd, "--env %s is given twice", k)
		}
		sb.LoginProfile.Env = append(sb.LoginProfile.Env, playgroundv1alpha1.EnvVar{Name: k, Value: v})
	}
	sb.LoginProfile.Script = f.loginScript
	switch {
	case f.cpuSeconds < 0:
		return usagef(cmd, "--usage-cpu-seconds %d: want a positive number of CPU-seconds", f.cpuSeconds)
	case f.usagePeriod != 0 && (f.cpuSeconds == 0 || f.usagePeriod < 10*time.Second):
		return usagef(cmd, "--usage-period %s: want at least 10s, with --usage-cpu-seconds", f.usagePeriod)
	case f.cpuSeconds > 0:
		period := cmp.Or(f.usagePeriod, 24*time.Hour) // the API's default, which a zero would not take
		sb.UsageLimits = &playgroundv1alpha1.UsageLimits{CPUSeconds: ptr.To(f.cpuSeconds), Period: metav1.Duration{Duration: period}}
	}
	return nil
}

// envName is the Tenant CRD's pattern of a login environment variable.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// hostPattern is the Tenant CRD's pattern of an egress host.
var hostPattern = regexp.MustCompile(`^(\*\.)?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)*[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// egressRule parses CIDR[:PORT,...] or HOST[:PORT,...]; an IPv6
// network's ports follow its prefix length (2001:db8::/32:443).
func egressRule(s string) (playgroundv1alpha1.EgressRule, error) {
	var rule playgroundv1alpha1.EgressRule
	var ports string
	if addr, rest, isNet := strings.Cut(s, "/"); isNet {
		bits, p, _ := strings.Cut(rest, ":")
		prefix, err := netip.ParsePrefix(addr + "/" + bits)
		if err != nil || prefix != prefix.Masked() {
			return rule, fmt.Errorf("want a network such as 10.0.0.0/8 or 2001:db8::/32 (host bits zero), then optionally :PORT,PORT")
		}
		rule.CIDR, ports = prefix.String(), p
	} else {
		dest, p, _ := strings.Cut(s, ":")
		if !hostPattern.MatchString(dest) {
			return rule, fmt.Errorf("want a lower-case host name such as pypi.org or *.githubusercontent.com, or a network such as 10.0.0.0/8, then optionally :PORT,PORT")
		}
		rule.Host, ports = dest, p
	}
	if ports == "" {
		return rule, nil
	}
	for _, p := range strings.Split(ports, ",") {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return rule, fmt.Errorf("port %q: want 1 to 65535", p)
		}
		rule.Ports = append(rule.Ports, int32(n))
	}
	return rule, nil
}

// printCreated prints the Tenant as -o asks, or says it was created.
func (x *cli) printCreated(t *playgroundv1alpha1.Tenant, how string) error {
	if x.output != "" {
		return x.printObject(t)
	}
	fmt.Fprintf(x.out, "tenant/%s created %s\n", t.Name, how)
	return nil
}

func (x *cli) create(ctx context.Context, t *playgroundv1alpha1.Tenant, f *createFlags) error {
	name := t.Name
	if f.dryRun == "server" {
		if err := x.c.Create(ctx, t, client.DryRunAll); err != nil {
			return err
		}
		return x.printCreated(t, "(server dry run)")
	}
	endpoint, note, err := x.mcpEndpoint(ctx, f.endpoint)
	if err != nil {
		return err
	}
	if err := x.c.Create(ctx, t); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("tenant %q already exists in namespace %s: its token is printed by kubectl playground token show %s", name, x.namespace, name)
		}
		return err
	}
	token, err := x.waitForToken(ctx, "the tenant's token", name, func(*playgroundv1alpha1.Tenant) bool { return true })
	if err != nil {
		return err
	}
	ready := false
	if f.wait {
		err := x.waitFor(ctx, "the tenant's sandbox to be Ready", func(ctx context.Context) (bool, error) {
			t, err := x.getTenant(ctx, name)
			if err != nil {
				return false, err
			}
			return meta.IsStatusConditionTrue(t.Status.Conditions, playgroundv1alpha1.ReadyCondition), nil
		})
		if err != nil {
			return err
		}
		ready = true
	}
	if x.output != "" {
		cur, err := x.getTenant(ctx, name)
		if err != nil {
			return err
		}
		return x.printObject(cur)
	}
	fmt.Fprintf(x.out, "tenant/%s created in namespace %s\ntoken: %s\n(kept in Secret %s: kubectl playground token show %s prints it again)\n",
		name, x.namespace, token, playgroundv1alpha1.CredentialSecretName(name), name)
	if !ready {
		fmt.Fprintf(x.out, "Its sandbox is being provisioned: kubectl playground status %s says how far (or create with --wait).\n", name)
	}
	fmt.Fprintln(x.out)
	printClients(x.out, x.namespace, name, endpoint, note, token)
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
	verb := "resumed: its token works again, and its sandbox goes on"
	if suspended {
		want, verb = metav1.ConditionFalse, "suspended: its token is refused, and its sandbox is put aside with its files"
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

// resolveImage asks the manager to resolve the tenant's image tag again
// and waits for the digest it records, or for why it cannot.
func (x *cli) resolveImage(ctx context.Context, name string) error {
	t, err := x.getTenant(ctx, name)
	if err != nil {
		return err
	}
	if t.Spec.Sandbox.Image == nil {
		return fmt.Errorf("tenant %q names no image (spec.sandbox.image): its sandbox runs its node's own system", name)
	}
	ref := t.Spec.Sandbox.Image.Reference
	want := time.Now().UTC().Format(time.RFC3339Nano)
	patch := client.MergeFrom(t.DeepCopy())
	metav1.SetMetaDataAnnotation(&t.ObjectMeta, playgroundv1alpha1.ResolveImageAnnotation, want)
	if err := x.c.Patch(ctx, t, patch); err != nil {
		return err
	}
	var got *playgroundv1alpha1.SandboxImageStatus
	err = x.waitFor(ctx, "the manager to resolve "+ref, func(ctx context.Context) (bool, error) {
		var s playgroundv1alpha1.Sandbox
		if err := x.c.Get(ctx, x.key(name), &s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if st := s.Status.Image; st != nil && st.ResolveRequest == want && st.Reference == ref {
			got = st
			return true, nil
		}
		c := meta.FindStatusCondition(s.Status.Conditions, playgroundv1alpha1.ImageResolvedCondition)
		if s.Annotations[playgroundv1alpha1.ResolveImageAnnotation] == want && c != nil && c.Status == metav1.ConditionFalse &&
			c.Reason != playgroundv1alpha1.ReasonImageResolving {
			return false, fmt.Errorf("%s cannot be resolved: %s: %s", ref, c.Reason, c.Message)
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(x.out, "tenant/%s: %s resolved to %s; the sandbox runs it from its next start\n", name, ref, got.Digest)
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
		err := x.c.Get(ctx, x.key(name), &playgroundv1alpha1.Tenant{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return err
	}
	if reclaimOf(t) == playgroundv1alpha1.ReclaimDelete {
		fmt.Fprintf(x.out, "tenant/%s destroyed: its sandbox, token, pile and signing key are gone (reclaim policy Delete)\n", name)
		return nil
	}
	key := ""
	if t.Spec.Pile.SigningKey.SecretName == "" {
		key = fmt.Sprintf(", and Secret %s its signing key", playgroundv1alpha1.SigningKeySecretName(name))
	}
	fmt.Fprintf(x.out, "tenant/%s destroyed: its sandbox and token are gone; under reclaim policy Retain its node keeps its pile%s, for a tenant created again as %s: kubectl playground pile delete %s removes the pile (tenant destroy --purge removes everything)\n",
		name, key, name, sandboxName(t))
	return nil
}

func reclaimOf(t *playgroundv1alpha1.Tenant) playgroundv1alpha1.ReclaimPolicy {
	if p := t.Spec.Pile.ReclaimPolicy; p != "" {
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
	var s playgroundv1alpha1.Sandbox
	if err := x.c.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: sandboxName(t)}, &s); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &s, nil
}

// sandboxName is the name of the tenant's Sandbox: its status says, else
// the tenant's own, as the manager names it.
func sandboxName(t *playgroundv1alpha1.Tenant) string {
	if t.Status.SandboxRef != nil {
		return t.Status.SandboxRef.Name
	}
	return t.Name
}
