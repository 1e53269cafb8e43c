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
// YAML do, faster. The YAML path stays first-class for GitOps.
//
//	kubectl playground tenant create NAME     create a tenant, print its token once
//	kubectl playground tenant token reset NAME
//	kubectl playground tenant suspend|resume NAME
//	kubectl playground tenant destroy NAME
//	kubectl playground attach NAME            sandbox ID, node and persona
//	kubectl playground status NAME            conditions of tenant, sandbox and node
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/playground-dev/playground/cmd/kubectl-playground/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := kubectlplugin.Run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
