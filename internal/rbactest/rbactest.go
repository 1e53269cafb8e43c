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

// Package rbactest runs a component under test with the rights its
// generated RBAC gives it and no more: it installs the roles of
// config/rbac/<component>/role.yaml into a real API server, binds them to
// a user, and returns a client configuration that impersonates that user.
// The API server then refuses whatever the component does beyond them.
package rbactest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/controlplane"
)

// ServiceAccountUser is the user name of the component's ServiceAccount in
// playground-system, as config/rbac binds it.
func ServiceAccountUser(component string) string {
	return "system:serviceaccount:playground-system:playground-" + component
}

// Roles reads the generated ClusterRoles and Roles of component.
func Roles(component string) ([]rbacv1.ClusterRole, []rbacv1.Role, error) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(root, "config", "rbac", component, "role.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var clusterRoles []rbacv1.ClusterRole
	var roles []rbacv1.Role
	for _, doc := range strings.Split(string(data), "\n---") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		switch meta.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", path, err)
			}
			clusterRoles = append(clusterRoles, r)
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict([]byte(doc), &r); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", path, err)
			}
			roles = append(roles, r)
		default:
			return nil, nil, fmt.Errorf("%s: unexpected kind %q", path, meta.Kind)
		}
	}
	return clusterRoles, roles, nil
}

// Options vary how the roles are granted.
type Options struct {
	// Namespace, when set, grants the ClusterRoles' rules only in this
	// namespace (a Role and RoleBinding there), as the chart does for a
	// gateway that serves one namespace.
	Namespace string
	// RoleNamespace, when set, moves the generated Roles (of
	// playground-system, the default lease namespace) there, as the chart
	// does with another lease namespace.
	RoleNamespace string
}

// Grant installs component's generated roles with admin (objects that
// exist already are kept: they are the same), binds them to user, and
// returns a copy of cfg that acts as user.
func Grant(ctx context.Context, admin client.Client, cfg *rest.Config, component, user string, opts Options) (*rest.Config, error) {
	clusterRoles, roles, err := Roles(component)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(user + "\x00" + opts.Namespace + "\x00" + opts.RoleNamespace))
	suffix := "-" + hex.EncodeToString(sum[:4])
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	var objs []client.Object
	for _, cr := range clusterRoles {
		if opts.Namespace != "" {
			role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: cr.Name + suffix, Namespace: opts.Namespace}, Rules: cr.Rules}
			objs = append(objs, role, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			})
			continue
		}
		objs = append(objs, cr.DeepCopy(), &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: cr.Name + suffix}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		})
	}
	for _, r := range roles {
		if opts.RoleNamespace != "" {
			r.Namespace = opts.RoleNamespace
		}
		objs = append(objs, r.DeepCopy(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name + suffix, Namespace: r.Namespace}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
		})
	}
	var granted []authorizationv1.ResourceAttributes
	for _, obj := range objs {
		if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("granting %s its %s rights: %w", user, component, err)
		}
		switch r := obj.(type) {
		case *rbacv1.ClusterRole:
			granted = append(granted, ruleAttributes("", r.Rules)...)
		case *rbacv1.Role:
			granted = append(granted, ruleAttributes(r.Namespace, r.Rules)...)
		}
	}
	if err := AwaitAllowed(ctx, cfg, user, nil, granted...); err != nil {
		return nil, fmt.Errorf("granting %s its %s rights: %w", user, component, err)
	}
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: user}
	return out, nil
}

// OnNode returns a copy of cfg, which impersonates a user, that also
// carries node in the user extra the API server records for a token bound
// to a pod on that node (authentication.kubernetes.io/node-name): what an
// agent's ServiceAccount token carries in a cluster, and what the
// installation's node restriction of the agents reads.
func OnNode(cfg *rest.Config, node string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate.Extra = map[string][]string{agentpki.NodeNameExtra: {node}}
	return out
}

// OnPod is OnNode with the pod as well (authentication.kubernetes.io/pod-name
// and pod-uid): the whole of what a pod-bound token carries, which the
// manager's signer of agent certificates checks against the Pod.
func OnPod(cfg *rest.Config, node, pod, podUID string) *rest.Config {
	out := OnNode(cfg, node)
	out.Impersonate.Extra[agentpki.PodNameExtra] = []string{pod}
	out.Impersonate.Extra[agentpki.PodUIDExtra] = []string{podUID}
	return out
}

// ruleAttributes is one request each rule allows (its first verb on its
// first resource, by its first name if it names any), in namespace ("" for
// the whole cluster).
func ruleAttributes(namespace string, rules []rbacv1.PolicyRule) []authorizationv1.ResourceAttributes {
	var out []authorizationv1.ResourceAttributes
	for _, r := range rules {
		if len(r.Verbs) == 0 || len(r.Resources) == 0 || len(r.APIGroups) == 0 {
			continue // a rule of non-resource URLs
		}
		resource, sub, _ := strings.Cut(r.Resources[0], "/")
		a := authorizationv1.ResourceAttributes{Namespace: namespace, Group: r.APIGroups[0], Resource: resource, Subresource: sub, Verb: r.Verbs[0]}
		if len(r.ResourceNames) > 0 {
			a.Name = r.ResourceNames[0]
		}
		out = append(out, a)
	}
	return out
}

// AwaitAllowed waits until the API server of cfg (an administrator's)
// allows user, of groups, each of attrs. Its authorizer learns of a new
// RoleBinding from its own watch, a moment after the create returns and
// longer on a loaded machine: a test that acts as the user at once may be
// refused.
func AwaitAllowed(ctx context.Context, cfg *rest.Config, user string, groups []string, attrs ...authorizationv1.ResourceAttributes) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, a := range attrs {
		for {
			res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &a},
			}, metav1.CreateOptions{})
			if err == nil && res.Status.Allowed {
				break
			}
			select {
			case <-ctx.Done():
				if err == nil {
					err = fmt.Errorf("not allowed after 30 s (%q)", res.Status.Reason)
				}
				return fmt.Errorf("the API server does not yet allow %s to %s %s/%s in %q: %w", user, a.Verb, a.Resource, a.Subresource, a.Namespace, err)
			case <-time.After(25 * time.Millisecond):
			}
		}
	}
	return nil
}
