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
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
	"github.com/playground-dev/playground/internal/devconfig"
	"github.com/playground-dev/playground/mcpgateway"
	"github.com/playground-dev/playground/mcpgateway/clusterview"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

const execWho = `Who may: a Kubernetes user allowed the RBAC verb "use" on the Tenant, as for
the stdio gateway (docs/tools.md, "stdio mode"), who may also get the Tenant,
its Sandbox and the ConfigMap playground-agent-ca of --lease-namespace. The
plugin asks the API server first (a SelfSubjectAccessReview), then presents
your kubeconfig's bearer token to the agent of the sandbox's node over TLS
(verified against that CA bundle, for that node), and the agent asks the API
server again (a SubjectAccessReview) before it runs anything. Reading the
tenant's token Secret is not enough. A kubeconfig that authenticates with a
client certificate has no token to present: use one from kubectl create token.`

// agentFlags say how to reach the agent of a tenant's sandbox as yourself.
type agentFlags struct {
	tokenFile, tlsCA string
	cleartext        bool
	timeout          time.Duration
}

func (a *agentFlags) add(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&a.timeout, "exec-timeout", 10*time.Minute, "kill a command (and every process it started) still running after this long; 0: no limit")
	a.addReach(cmd)
}

// addReach adds the flags that say how to reach the agent.
func (a *agentFlags) addReach(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.tokenFile, "agent-token-file", "", "present the token in this file to the agent instead of your kubeconfig's")
	f.StringVar(&a.tlsCA, "agent-tls-ca", "", "PEM file of the CA of the agents' certificates (default: the ConfigMap playground-agent-ca of --lease-namespace)")
	f.BoolVar(&a.cleartext, "agent-cleartext", false, "reach an agent whose endpoint is http:// (playground-dev's only; its own kubeconfig needs no flag): your token then crosses in clear")
}

func (a *agentFlags) check(cmd *cobra.Command) error {
	if a.timeout < 0 || a.timeout > bounds.MaxTimeout {
		return usagef(cmd, "--exec-timeout %s: want 0 (none) to %s", a.timeout, bounds.MaxTimeout)
	}
	return nil
}

func (x *cli) execCommand() *cobra.Command {
	var af agentFlags
	var stdin bool
	var cwd string
	cmd := &cobra.Command{
		Use:   "exec NAME [flags] -- COMMAND [ARG...]",
		Short: "Run a command in the tenant's sandbox, as yourself",
		Long: `Run COMMAND in the tenant's sandbox, in a fresh login /bin/sh (the tenant's
profile loaded) as the exec tool runs it, and exit with its exit status (128+N
for a signal N, 124 for --exec-timeout). Its stdout and stderr come back byte
for byte once it has ended, not as it runs, up to the agent's bound of a
command's output (what it drops is said on stderr). The ARGs are quoted for
the shell, so COMMAND gets them as given; for shell syntax run sh -c '...'.

` + execWho,
		Example: `  kubectl playground exec alice -- uname -r
  kubectl playground exec alice -- sh -c 'cd /workspace && make test'
  tar cz src | kubectl playground exec alice -i -- tar xz -C /workspace`,
		ValidArgsFunction: x.completeTenants,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0 || dash == 0:
				return usagef(cmd, "exec needs the tenant's name and a command: exec NAME -- COMMAND [ARG...]")
			case dash > 1:
				return usagef(cmd, "exec takes one tenant's name before --, not %q", strings.Join(args[:dash], " "))
			case len(args) == 1:
				return usagef(cmd, "exec needs a command after the tenant's name: exec %s -- COMMAND [ARG...]", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := af.check(cmd); err != nil {
				return err
			}
			var in []byte
			if stdin {
				var err error
				if in, err = io.ReadAll(io.LimitReader(x.env.In, tools.MaxFileBytes+1)); err != nil {
					return fmt.Errorf("reading standard input: %w", err)
				}
				if len(in) > tools.MaxFileBytes {
					return fmt.Errorf("standard input is over %d bytes, the most a command takes: copy it into the sandbox in parts first", tools.MaxFileBytes)
				}
			}
			ctx := cmd.Context()
			s, err := x.openSession(ctx, args[0], &af)
			if err != nil {
				return err
			}
			defer s.close()
			res, err := s.exec(ctx, agentapi.ExecRequest{Command: shellJoin(args[1:]), Cwd: cwd, Stdin: in, Timeout: af.timeout})
			if err != nil {
				return err
			}
			if code := x.report(res, af.timeout); code != 0 {
				return &ExitError{Code: code}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass standard input to the command (read whole first, up to 3 MiB)")
	cmd.Flags().StringVar(&cwd, "cwd", "", "the directory in the sandbox to run in (default: the tenant's home)")
	af.add(cmd)
	return cmd
}

func (x *cli) shellCommand() *cobra.Command {
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "shell NAME",
		Short: "Run commands in the tenant's sandbox, one a line, as yourself",
		Long: `Read commands from standard input, one a line, and run each in the tenant's
sandbox as exec does, printing its output when it has ended.

It runs no terminal (PTY): this is not an interactive shell in the sandbox,
no line editing there, no editors, pagers or programs that read a terminal,
no input to a running command (a client of the extended tools has those:
job_exec with tty, job_input, job_screen). Each line
runs in a fresh /bin/sh, so variables and the shell's own state do not carry
over; cd does (the plugin keeps the directory). exit, or the end of input,
ends it with the last command's exit status; Ctrl-C ends it and kills the
command running.

` + execWho,
		Args:              name("tenant"),
		ValidArgsFunction: x.completeTenants,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := af.check(cmd); err != nil {
				return err
			}
			return x.shell(cmd.Context(), args[0], &af)
		},
	}
	af.add(cmd)
	return cmd
}

// sandboxSession is a session handle on a tenant's sandbox, held through
// the agent of its node as the caller.
type sandboxSession struct {
	agent                     *agentapi.Client
	tenant, sandboxID, handle string
}

// openSession checks that the caller may use the tenant, finds its
// sandbox's agent, and opens a handle there, as a stdio gateway would.
func (x *cli) openSession(ctx context.Context, name string, af *agentFlags) (*sandboxSession, error) {
	s, err := x.reachSandbox(ctx, name, af)
	if err != nil {
		return nil, err
	}
	return s, s.open(ctx)
}

// reachSandbox checks that the caller may use the tenant and finds its
// sandbox's agent; the session it returns has no handle yet.
func (x *cli) reachSandbox(ctx context.Context, name string, af *agentFlags) (*sandboxSession, error) {
	cfg, err := x.restConfig()
	if err != nil {
		return nil, err
	}
	if err := x.connect(); err != nil {
		return nil, err
	}
	id := clusterview.Identity{Namespace: x.namespace, Name: name}
	if err := mcpgateway.Authorize(ctx, cfg, id); err != nil {
		return nil, err
	}
	_, sbx, err := x.tenantAndSandbox(ctx, name)
	if err != nil {
		return nil, err
	}
	if sbx == nil {
		return nil, fmt.Errorf("tenant %s has no sandbox yet: kubectl playground status %s tells why", id, name)
	}
	cleartext := af.cleartext
	if strings.HasPrefix(sbx.Status.Endpoint, "http://") && !cleartext {
		if cleartext, err = x.devAgent(cfg, id, sbx.Status.Endpoint); err != nil {
			return nil, err
		}
	}
	token, err := af.token(cfg)
	if err != nil {
		return nil, err
	}
	ca, err := af.ca(ctx, cfg, x.leaseNamespace, sbx.Status.Endpoint)
	if err != nil {
		return nil, err
	}
	agents, err := mcpgateway.NewUserAgents(token, ca, cleartext)
	if err != nil {
		return nil, err
	}
	sandboxID, agent, err := agents.Sandbox(ctx, sbx)
	if err != nil {
		return nil, err
	}
	return &sandboxSession{agent: agent, tenant: id.String(), sandboxID: sandboxID}, nil
}

// devAgent says whether the cleartext agent at endpoint may be reached
// without --agent-cleartext: it is playground-dev's, as its kubeconfig
// says, and both it and the API server are on this machine's loopback, so
// that the token sent there in clear never leaves the machine. Otherwise
// the error says what to do.
func (x *cli) devAgent(cfg *rest.Config, id clusterview.Identity, endpoint string) (bool, error) {
	refused := fmt.Errorf("the agent of tenant %s's node serves without TLS (%s), as only playground-dev's does: with playground-dev's own kubeconfig (.dev/kubeconfig) the plugin reaches it as it is; with another, give --agent-cleartext and --agent-token-file .dev/agent-token", id, endpoint)
	dev, err := x.devCluster()
	switch {
	case err != nil:
		return false, errors.Join(refused, err)
	case dev == nil:
		return false, refused
	}
	if err := devconfig.ReachAgent(cfg.Host, endpoint); err != nil {
		return false, fmt.Errorf("the kubeconfig says its cluster is a playground-dev, but %w: the plugin sends no token in clear off this machine (give --agent-cleartext if you mean it)", err)
	}
	return true, nil
}

// token is what the caller presents to the agent: the file's, or the
// kubeconfig's.
func (a *agentFlags) token(cfg *rest.Config) (func() (string, error), error) {
	if a.tokenFile == "" {
		return mcpgateway.KubeconfigToken(cfg)
	}
	token := mcpgateway.FileToken(a.tokenFile, logr.Discard())
	if _, err := token(); err != nil {
		return nil, fmt.Errorf("--agent-token-file: %w", err)
	}
	return token, nil
}

// ca is what verifies an https:// agent: the file's bundle, or the one the
// manager publishes.
func (a *agentFlags) ca(ctx context.Context, cfg *rest.Config, leaseNamespace, endpoint string) (*mcpgateway.AgentCA, error) {
	switch {
	case a.tlsCA != "":
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--agent-tls-ca: %w", err)
		}
		ca, err := mcpgateway.StaticAgentCA(pem)
		if err != nil {
			return nil, fmt.Errorf("--agent-tls-ca %s: %w", a.tlsCA, err)
		}
		return ca, nil
	case strings.HasPrefix(endpoint, "https://"):
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		return mcpgateway.ReadAgentCA(ctx, cs, leaseNamespace)
	}
	return nil, nil
}

func (s *sandboxSession) open(ctx context.Context) error {
	h, err := s.agent.Open(ctx, s.tenant, s.sandboxID)
	if err != nil {
		return fmt.Errorf("opening a session on tenant %s's sandbox: %w", s.tenant, err)
	}
	s.handle = h.ID
	return nil
}

// exec runs a command on the session's handle, opening a new handle when
// the last one expired unused (a shell left idle): the command had not
// started then.
func (s *sandboxSession) exec(ctx context.Context, req agentapi.ExecRequest) (agentapi.ExecResult, error) {
	res, err := s.agent.Exec(ctx, s.tenant, s.handle, req)
	var e *agentapi.Error
	if errors.As(err, &e) && e.Code == agentapi.CodeNotFound && e.Message == agentapi.HandleNotFound {
		if err := s.open(ctx); err != nil {
			return res, err
		}
		res, err = s.agent.Exec(ctx, s.tenant, s.handle, req)
	}
	return res, err
}

// close releases the handle, also when the command was interrupted.
func (s *sandboxSession) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.agent.Close(ctx, s.tenant, s.handle)
}

// signalNumbers are the signals whose numbers POSIX systems share.
var signalNumbers = map[string]int{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGTRAP": 5, "SIGABRT": 6,
	"SIGKILL": 9, "SIGSEGV": 11, "SIGPIPE": 13, "SIGALRM": 14, "SIGTERM": 15,
}

// report writes the command's output byte for byte, says on stderr what
// the output cannot (dropped bytes, a timeout, a signal, the OOM killer),
// and returns the exit status a shell would.
func (x *cli) report(res agentapi.ExecResult, timeout time.Duration) int {
	_, _ = x.env.Out.Write(res.Stdout)
	_, _ = x.env.ErrOut.Write(res.Stderr)
	note := func(format string, args ...any) {
		fmt.Fprintf(x.env.ErrOut, "kubectl playground: "+format+"\n", args...)
	}
	for _, d := range []struct {
		stream string
		n      int64
	}{{"stdout", res.StdoutDropped}, {"stderr", res.StderrDropped}} {
		if d.n > 0 {
			note("%d more bytes of %s were dropped, past the agent's bound of a command's output: write it to a file in the sandbox and read that in parts", d.n, d.stream)
		}
	}
	if res.OOMKilled {
		note("the sandbox ran out of memory while the command ran, and the kernel killed a process of it (kubectl playground status shows the sandbox's limit)")
	}
	switch {
	case res.TimedOut:
		note("the command ran longer than --exec-timeout %s: it and every process it started were killed", timeout)
		return 124
	case res.ExitCode >= 0:
		return res.ExitCode
	}
	note("the command was ended by %s", cmpOr(res.Signal, "a signal"))
	if n, ok := signalNumbers[res.Signal]; ok {
		return 128 + n
	}
	return 1
}

// shell runs the lines of standard input as commands in the sandbox.
func (x *cli) shell(ctx context.Context, name string, af *agentFlags) error {
	s, err := x.openSession(ctx, name, af)
	if err != nil {
		return err
	}
	defer s.close()
	interactive := stdinIsTerminal(x.env.In)
	cwd, status := "", 0
	prompt := func() {
		if interactive {
			fmt.Fprintf(x.env.ErrOut, "%s:%s$ ", s.tenant, cmpOr(cwd, "~"))
		}
	}
	if interactive {
		fmt.Fprintf(x.env.ErrOut, "Commands run in tenant %s's sandbox, one a line, each in a fresh /bin/sh (no terminal: no editors or pagers; cd is kept). exit or Ctrl-D ends.\n", s.tenant)
	}
	lines := bufio.NewScanner(x.env.In)
	lines.Buffer(make([]byte, 0, 64<<10), bounds.MaxCommandBytes+1)
	for prompt(); lines.Scan(); prompt() {
		line := strings.TrimSpace(lines.Text())
		word, rest, _ := strings.Cut(line, " ")
		req := agentapi.ExecRequest{Command: line, Cwd: cwd, Timeout: af.timeout}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case word == "exit":
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				status = n
			}
			return exitWith(status)
		case word == "cd":
			// The directory lives here: each command's shell is new.
			req.Command = line + " && pwd"
		}
		res, err := s.exec(ctx, req)
		switch code := agentapi.CodeOf(err); {
		case err == nil:
		case ctx.Err() != nil, code == agentapi.CodeUnauth, code == agentapi.CodeForbidden:
			return err
		default:
			fmt.Fprintf(x.env.ErrOut, "error: %v\n", err)
			status = 1
			continue
		}
		if word == "cd" && res.ExitCode == 0 && !res.TimedOut {
			cwd = strings.TrimSpace(string(res.Stdout))
			res.Stdout = nil
		}
		status = x.report(res, af.timeout)
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("reading commands: %w (a command is at most %d bytes)", err, bounds.MaxCommandBytes)
	}
	if interactive {
		fmt.Fprintln(x.env.ErrOut)
	}
	return exitWith(status)
}

func exitWith(status int) error {
	if status == 0 {
		return nil
	}
	return &ExitError{Code: status}
}

// stdinIsTerminal says whether in is a terminal (a person typing).
func stdinIsTerminal(in io.Reader) bool {
	f, ok := in.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
