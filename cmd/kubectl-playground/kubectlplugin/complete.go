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
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/agentlease"
)

// Shell completion: kubectl runs kubectl_complete-playground with the words
// after "kubectl playground", which runs this binary's hidden __complete
// command (cobra's protocol, which kubectl reads): subcommands and flags
// come from the command tree, names from the API server.

// completeTimeout bounds a completion's calls: a shell waits for them.
const completeTimeout = 5 * time.Second

// completeNames lists names with list, the first argument only.
func (x *cli) completeNames(cmd *cobra.Command, args []string, toComplete string, list func(ctx context.Context) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if err := x.connect(); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	names, err := list(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// listNames lists the names of the objects of kind (metadata only).
func (x *cli) listNames(ctx context.Context, kind schema.GroupVersionKind, opts ...client.ListOption) ([]string, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(kind.GroupVersion().WithKind(kind.Kind + "List"))
	if err := x.c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	names := make([]string, len(list.Items))
	for i := range list.Items {
		names[i] = list.Items[i].Name
	}
	return names, nil
}

// completeTenants offers the names of the namespace's tenants.
func (x *cli) completeTenants(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return x.completeNames(cmd, args, toComplete, func(ctx context.Context) ([]string, error) {
		return x.listNames(ctx, playgroundv1alpha1.GroupVersion.WithKind("Tenant"), client.InNamespace(x.namespace))
	})
}

// completeFaculties offers the namespace's FacultyBundles, for --faculty.
func (x *cli) completeFaculties(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return x.completeNames(cmd, nil, toComplete, func(ctx context.Context) ([]string, error) {
		return x.listNames(ctx, playgroundv1alpha1.GroupVersion.WithKind("FacultyBundle"), client.InNamespace(x.namespace))
	})
}

// completeNamespaces offers the cluster's namespaces, for -n.
func (x *cli) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return x.completeNames(cmd, nil, toComplete, func(ctx context.Context) ([]string, error) {
		return x.listNames(ctx, corev1.SchemeGroupVersion.WithKind("Namespace"))
	})
}

// completeNodes offers the nodes whose agents registered, for node forget.
func (x *cli) completeNodes(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return x.completeNames(cmd, args, toComplete, func(ctx context.Context) ([]string, error) {
		var list coordinationv1.LeaseList
		if err := x.c.List(ctx, &list, client.InNamespace(x.leaseNamespace)); err != nil {
			return nil, err
		}
		var names []string
		for i := range list.Items {
			if reg, err := agentlease.FromLease(&list.Items[i]); err == nil && list.Items[i].Name == agentlease.Name(reg.Node) {
				names = append(names, reg.Node)
			}
		}
		return names, nil
	})
}
