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

// Package selfowner names the ServiceAccount a component runs as, read
// from the component's own token, as the owner of the objects the
// component creates at run time in its namespace: the agents' registration
// Leases, the manager's leader-election Lease and the agent CA's Secret and
// ConfigMap. Uninstalling Playground (helm uninstall, kubectl delete -k)
// deletes the ServiceAccounts, and with them the garbage collector deletes
// these objects, which no manifest lists.
package selfowner

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TokenPath is where the kubelet projects a pod's ServiceAccount token.
const TokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token" //nolint:gosec // G101: a path, not a credential

// Owner is a ServiceAccount as the owner of objects in its namespace.
type Owner struct {
	Namespace string
	Name      string
	UID       types.UID
}

// claims are the parts of a projected ServiceAccount token's payload that
// name its ServiceAccount.
type claims struct {
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

// FromToken reads the ServiceAccount named by the token at path. The token
// is not verified: it is the component's own, read from its own pod, and
// names only whom to record as owner. No token file (outside a cluster:
// playground-dev, the tests) gives nil and no error: nothing is owned.
func FromToken(path string) (*Owner, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(string(b))
}

// Parse reads the ServiceAccount from a projected token (a JWT whose
// payload has the kubernetes.io claims).
func Parse(token string) (*Owner, error) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil, errors.New("selfowner: the ServiceAccount token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("selfowner: the ServiceAccount token's payload: %w", err)
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("selfowner: the ServiceAccount token's payload: %w", err)
	}
	k := c.Kubernetes
	if k.Namespace == "" || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "" {
		return nil, errors.New("selfowner: the token has no kubernetes.io claims naming its ServiceAccount (a legacy Secret token, not a projected one)")
	}
	return &Owner{Namespace: k.Namespace, Name: k.ServiceAccount.Name, UID: types.UID(k.ServiceAccount.UID)}, nil
}

// Own makes o an owner of obj and says whether obj changed. It does so
// only in o's own namespace: the garbage collector treats an owner in
// another namespace as absent and would delete obj at once. A nil Owner
// owns nothing. The reference does not block the owner's deletion, which
// would need rights on the ServiceAccount.
func (o *Owner) Own(obj metav1.Object) bool {
	if o == nil || obj.GetNamespace() != o.Namespace {
		return false
	}
	refs := obj.GetOwnerReferences()
	for _, r := range refs {
		if r.UID == o.UID {
			return false
		}
	}
	obj.SetOwnerReferences(append(refs, metav1.OwnerReference{
		APIVersion: corev1.SchemeGroupVersion.String(),
		Kind:       "ServiceAccount",
		Name:       o.Name,
		UID:        o.UID,
	}))
	return true
}
