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
// operations as one command each, doing what kubectl and YAML do, faster,
// and a way into a tenant's sandbox for a user RBAC allows to use it.
package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/devconfig"
	"github.com/playground-dev/playground/internal/scheme"
)

// Env is what one run of the plugin reads, prints to and connects with.
type Env struct {
	In          io.Reader
	Out, ErrOut io.Writer
	// Config, when set, is the cluster's client configuration, used instead
	// of the kubeconfig (tests).
	Config *rest.Config
	// Version is the plugin's build, as `version` prints it.
	Version string
}

// withDefaults reads nothing and prints nowhere where env does not say.
func (env Env) withDefaults() Env {
	if env.In == nil {
		env.In = strings.NewReader("")
	}
	if env.Out == nil {
		env.Out = io.Discard
	}
	if env.ErrOut == nil {
		env.ErrOut = io.Discard
	}
	return env
}

// ExitError ends the plugin with Code and nothing more printed: the exit
// status of a command run by exec or shell.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// usageError is a mistake in the command line: printed as one line and a
// pointer to the help of the command it was made in.
type usageError struct {
	command string
	err     error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{command: cmd.CommandPath(), err: fmt.Errorf(format, args...)}
}

// Main runs the plugin and returns its exit status, having printed any
// error to env.ErrOut the way kubectl does: "error: ..." and, for a
// mistake in the command line, where its help is.
func Main(ctx context.Context, args []string, env Env) int {
	env = env.withDefaults()
	err := Run(ctx, args, env)
	var exit *ExitError
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	case errors.As(err, &usage):
		fmt.Fprintf(env.ErrOut, "error: %v\nSee '%s --help' for usage.\n", err, usage.command)
	case ctx.Err() != nil:
		fmt.Fprintln(env.ErrOut, "error: interrupted")
		return 130
	default:
		fmt.Fprintf(env.ErrOut, "error: %v\n", err)
	}
	return 1
}

// Run runs the plugin with args (those after "kubectl playground").
func Run(ctx context.Context, args []string, env Env) error {
	env = env.withDefaults()
	x := &cli{env: env, out: env.Out}
	root := x.commands()
	root.SetArgs(args)
	root.SetIn(env.In)
	root.SetOut(env.Out)
	root.SetErr(env.ErrOut)
	return root.ExecuteContext(ctx)
}

// pluginScheme knows the kinds the plugin reads and prints.
var pluginScheme = scheme.New()

// cli is one invocation: its flags, its client, where it prints.
type cli struct {
	env Env
	out io.Writer

	kubeconfig, kubeContext string
	namespace               string
	allNamespaces           bool
	timeout                 time.Duration
	leaseNamespace          string
	output                  string

	loader clientcmd.ClientConfig
	cfg    *rest.Config
	c      client.Client
}

const rootLong = `kubectl playground: the tenants of Playground, one command each.

Create a tenant, give its token to an MCP client, suspend, resume, restart
or destroy it, see what it waits for, and run commands in its sandbox. The
Tenant YAML stays the way for GitOps (tenant create --dry-run -o yaml
prints one).`

func (x *cli) commands() *cobra.Command {
	root := &cobra.Command{
		Use:          "playground",
		Short:        "Playground's tenants and sandboxes",
		Long:         rootLong,
		Annotations:  map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl playground"},
		Version:      x.env.Version,
		SilenceUsage: true, SilenceErrors: true,
		// Completion goes through kubectl: kubectl_complete-playground.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	root.SetVersionTemplate("kubectl-playground {{.Version}}\n")
	// Without the -v cobra would add: kubectl's -v is verbosity.
	root.Flags().Bool("version", false, "print the plugin's version")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usagef(cmd, "%v", err) })
	group(root)

	f := root.PersistentFlags()
	f.StringVarP(&x.namespace, "namespace", "n", "", "namespace of the tenant (default: the kubeconfig context's)")
	f.StringVar(&x.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&x.kubeContext, "context", "", "kubeconfig context")
	f.DurationVar(&x.timeout, "timeout", 60*time.Second, "how long to wait for the cluster (the manager, the node's agent)")
	f.StringVar(&x.leaseNamespace, "lease-namespace", agentlease.DefaultNamespace, "where agents register and the agents' CA bundle is published")
	_ = root.RegisterFlagCompletionFunc("namespace", x.completeNamespaces)

	root.AddCommand(
		x.versionCommand(),
		x.statusCommand(),
		x.tenantCommand(),
		x.tokenCommand(),
		x.attachCommand(),
		x.execCommand(),
		x.shellCommand(),
		x.jobsCommand(),
		x.auditCommand(),
		x.logsCommand(),
		x.nodeCommand(),
		x.pileCommand(),
		x.suspendCommand(true),
		x.suspendCommand(false),
		x.snapshotCommand(),
		x.forkCommand(),
	)
	return root
}

// group makes cmd a group of subcommands: alone it prints its help; with
// a word that is none of its subcommands it is a mistake, said in one line.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return &usageError{command: c.CommandPath(), err: errors.New(msg)}
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	return cmd
}

// name is the positional argument of a command on one tenant (or node).
func name(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef(cmd, "%s needs the %s's name", commandName(cmd), what)
		case len(args) > 1:
			return usagef(cmd, "%s takes one %s's name, not %q", commandName(cmd), what, strings.Join(args, " "))
		}
		return nil
	}
}

// commandName is how a message names cmd: "tenant create".
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), "kubectl playground ")
}

// optionalName is the positional argument of a command on one tenant or,
// without it, on all of them.
func optionalName(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usagef(cmd, "%s takes at most one tenant's name, not %q", commandName(cmd), strings.Join(args, " "))
	}
	return nil
}

func (x *cli) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			fmt.Fprintf(x.out, "kubectl-playground %s\n", x.env.Version)
			return nil
		},
	}
}

// kubeconfigLoader reads the kubeconfig of --kubeconfig and --context
// when first asked.
func (x *cli) kubeconfigLoader() clientcmd.ClientConfig {
	if x.loader == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = x.kubeconfig
		x.loader = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: x.kubeContext})
	}
	return x.loader
}

// ns is the namespace of the command: -n, else the kubeconfig context's,
// else default. It needs no cluster (tenant create --dry-run).
func (x *cli) ns() (string, error) {
	if x.namespace == "" && x.env.Config == nil {
		ns, _, err := x.kubeconfigLoader().Namespace()
		if err != nil && !clientcmd.IsEmptyConfig(err) {
			return "", fmt.Errorf("loading the kubeconfig: %w", err)
		}
		x.namespace = ns
	}
	if x.namespace == "" {
		x.namespace = "default"
	}
	return x.namespace, nil
}

// restConfig is the cluster's client configuration, from the kubeconfig
// unless the caller gave one; it also settles the namespace. It does not
// contact the API server.
func (x *cli) restConfig() (*rest.Config, error) {
	if x.cfg == nil {
		x.cfg = x.env.Config
		if x.cfg == nil {
			cfg, err := x.kubeconfigLoader().ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("loading the kubeconfig: %w", err)
			}
			x.cfg = cfg
		}
	}
	if _, err := x.ns(); err != nil {
		return nil, err
	}
	return x.cfg, nil
}

// devCluster is what the kubeconfig's cluster says of itself when it is a
// playground-dev (package devconfig), or nil: it is not, or the caller
// gave a configuration instead of a kubeconfig.
func (x *cli) devCluster() (*devconfig.Extension, error) {
	if x.env.Config != nil {
		return nil, nil
	}
	raw, err := x.kubeconfigLoader().RawConfig()
	if err != nil {
		return nil, nil //nolint:nilerr // no kubeconfig: no playground-dev either; the client says why when it needs one
	}
	return devconfig.Find(&raw, x.kubeContext)
}

// connect makes x.c, the client of the API server, on first use.
func (x *cli) connect() error {
	if x.c != nil {
		return nil
	}
	cfg, err := x.restConfig()
	if err != nil {
		return err
	}
	x.c, err = client.New(cfg, client.Options{Scheme: pluginScheme})
	return err
}

// checkOutput refuses an -o the command does not print.
func (x *cli) checkOutput(cmd *cobra.Command) error {
	switch x.output {
	case "", "json", "yaml":
		return nil
	}
	return usagef(cmd, "--output %q: want json or yaml (or none, for a table)", x.output)
}

func outputFlag(cmd *cobra.Command, p *string, what string) {
	cmd.Flags().StringVarP(p, "output", "o", "", "print "+what+" as json or yaml instead")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}
