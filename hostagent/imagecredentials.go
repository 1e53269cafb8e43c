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

package hostagent

import (
	"context"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	k8schain "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	corev1 "k8s.io/api/core/v1"

	"github.com/playground-dev/playground/hostagent/agentapi"
)

// SandboxObject names a Sandbox object: its namespace, name and UID (an
// object created again under the same name is another one).
type SandboxObject struct {
	Namespace, Name, UID string
}

// ImageCredentials is the pull-credential service: the registry
// credentials the manager delivered for each Sandbox object of the node,
// kept in memory only (never written to disk: an agent that starts
// again has none until the manager delivers them again), and the
// keychain a pull of that Sandbox's image authenticates with. The node
// agent decides which objects it takes credentials for (those bound to
// its node) and drops them when the Sandbox goes.
type ImageCredentials struct {
	mu sync.Mutex
	// keychains are the delivered credentials, parsed, by object: at
	// most one entry per Sandbox bound to the node.
	keychains map[SandboxObject]authn.Keychain
}

// NewImageCredentials returns a service that holds no credentials.
func NewImageCredentials() *ImageCredentials {
	return &ImageCredentials{keychains: map[SandboxObject]authn.Keychain{}}
}

// SetImageCredentials replaces the credentials of obj with configs, the
// .dockerconfigjson of each of its pull Secrets in order (checked
// against agentapi's bounds by the caller, where they enter); none
// forgets them. A config that is not a Docker config is refused, and the
// error never quotes it.
func (c *ImageCredentials) SetImageCredentials(obj SandboxObject, configs [][]byte) error {
	if len(configs) == 0 {
		c.ForgetImageCredentials(obj)
		return nil
	}
	secrets := make([]corev1.Secret, len(configs))
	for i, cfg := range configs {
		secrets[i] = corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}}
	}
	// It parses only (no call leaves the process): no context to bound.
	kc, err := k8schain.NewFromPullSecrets(context.Background(), secrets)
	if err != nil {
		// Its error may quote the config's bytes: not repeated.
		return &agentapi.Error{Code: agentapi.CodeInvalid, Message: "a pull Secret's .dockerconfigjson of Sandbox " + obj.Namespace + "/" + obj.Name +
			" is not a Docker config (JSON with registries under \"auths\"): write it again, as kubectl create secret docker-registry does"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keychains[obj] = kc
	return nil
}

// ForgetImageCredentials drops the credentials of obj.
func (c *ImageCredentials) ForgetImageCredentials(obj SandboxObject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.keychains, obj)
}

// Keychain is the keychain of the credentials delivered for the Sandbox
// namespace/name with that UID, nil when none were: a pull without it is
// anonymous.
func (c *ImageCredentials) Keychain(namespace, name, uid string) authn.Keychain {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keychains[SandboxObject{Namespace: namespace, Name: name, UID: uid}]
}
