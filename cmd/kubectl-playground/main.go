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

// Command kubectl-playground is the kubectl plugin of Playground: the
// everyday tenant operations as one command each, doing what kubectl and
// YAML do, faster. The YAML path stays first-class for GitOps. With
// bin/ on PATH, kubectl runs it as `kubectl playground`, and completes
// its words through kubectl_complete-playground beside it.
//
//	kubectl playground status [NAME]            every tenant, or one's conditions
//	kubectl playground tenant create NAME       create a tenant, print its token and client configurations
//	kubectl playground token show|reset NAME
//	kubectl playground tenant suspend|resume|restart|destroy NAME
//	kubectl playground attach NAME              how to connect an MCP client
//	kubectl playground exec NAME -- COMMAND     run a command in the sandbox, as yourself
//	kubectl playground shell NAME               commands from stdin, one a line
//
// `kubectl playground --help` says the rest.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/playground-dev/playground/cmd/kubectl-playground/kubectlplugin"
	"github.com/playground-dev/playground/internal/buildinfo"
)

// version is this build's version, set when it is linked
// (-ldflags "-X main.version=v0.2.0"), as playground's is.
var version string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlplugin.Main(ctx, os.Args[1:], kubectlplugin.Env{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr, Version: buildinfo.Version(version),
	})
	stop()
	os.Exit(code)
}
