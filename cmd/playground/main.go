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

// Command playground is the binary of Playground's components, the one the
// image ships. Its first argument picks the role: manager (the
// controllers), agent (the node's host agent) or gateway (the MCP gateway).
// Everything on one machine, on an embedded control plane, is another
// command, playground-dev: it links the test control plane, which no
// component needs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/internal/selfowner"
)

const usage = `Usage: playground <role> [flags]

Roles:
  manager   run the controllers
  agent     run the host agent of this node
  gateway   run the MCP gateway
  audit     verify an audit trail: playground audit verify FILE...
  version   print this build's version

Run 'playground <role> -h' for the flags of a role. To run the control
plane, the components and the samples on this machine: playground-dev
(make dev).
`

func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the role that args name and returns the process's exit code.
func run(args []string) int {
	if len(args) < 1 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	role, args := args[0], args[1:]
	var err error
	switch role {
	case "manager":
		err = runManager(ctx, args)
	case "agent":
		err = runAgent(ctx, args)
	case "gateway":
		err = runGateway(ctx, args)
	case "audit":
		err = runAudit(args, os.Stdout)
	case "version", "--version":
		fmt.Println(buildVersion())
		return 0
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "playground: unknown role %q\n\n%s", role, usage)
		return 2
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "playground:", err)
		return 1
	}
	return 0
}

// ownServiceAccount is the ServiceAccount the process runs as in a pod, to
// own the objects it creates that no manifest lists (package selfowner);
// nil outside a pod, or, said in the log, when its token names none.
func ownServiceAccount(log logr.Logger) *selfowner.Owner {
	o, err := selfowner.FromToken(selfowner.TokenPath)
	if err != nil {
		log.Error(err, "Objects created at run time get no owner: uninstalling leaves them behind", "token", selfowner.TokenPath)
	}
	return o
}

// pprofUsage is the help of --pprof-bind-address.
const pprofUsage = `address of Go's profiles (/debug/pprof/), served without authentication: keep it on 127.0.0.1 and reach it with kubectl port-forward; "0" disables it`
