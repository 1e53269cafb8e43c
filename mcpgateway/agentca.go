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

package mcpgateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/go-logr/logr"

	"github.com/playground-dev/playground/internal/agentpki"
)

// +kubebuilder:rbac:groups="",namespace=playground-system,resources=configmaps,verbs=get;list;watch,resourceNames=playground-agent-ca

// AgentCA is the CA bundle the manager publishes for the agents' serving
// certificates (the ConfigMap agentpki.CAConfigMapName in the lease
// namespace), watched so that a new bundle takes effect on the next
// handshake. The gateway trusts that bundle and nothing else: an agent
// certificate from any other issuer, the system's roots included, is
// refused. Until a bundle is seen, every handshake fails (fail closed).
type AgentCA struct {
	pool atomic.Pointer[x509.CertPool]
	// nodeNamed requires each certificate's subject to name the node whose
	// agent is dialled, as the Playground signer issues them: an agent's
	// certificate is then good for its own node's endpoint only, even when
	// an address moves to another node.
	nodeNamed bool
}

// WatchAgentCA starts watching the published bundle in namespace until ctx
// ends; it does not wait for it.
func WatchAgentCA(ctx context.Context, cs kubernetes.Interface, namespace string, log logr.Logger) *AgentCA {
	a := &AgentCA{nodeNamed: true}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "configmaps", namespace,
		fields.OneTermEqualSelector("metadata.name", agentpki.CAConfigMapName))
	set := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		pool, err := agentpki.Pool([]byte(cm.Data[agentpki.CABundleKey]))
		if err != nil {
			log.Error(err, "The published agent CA bundle is unusable; keeping the previous one", "configMap", namespace+"/"+agentpki.CAConfigMapName)
			return
		}
		a.pool.Store(pool)
		log.Info("Loaded the agent CA bundle", "configMap", namespace+"/"+agentpki.CAConfigMapName)
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.ConfigMap{},
		ResyncPeriod:  10 * time.Minute,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, obj any) { set(obj) },
			// A deleted bundle keeps the last one: the manager re-creates
			// it, and the agents' certificates are still signed by it.
		},
	})
	go informer.RunWithContext(ctx)
	return a
}

// ReadAgentCA reads the published bundle in namespace once, for a
// short-lived client (kubectl playground exec) that has no watch to wait
// for. As with WatchAgentCA, each certificate must name its node.
func ReadAgentCA(ctx context.Context, cs kubernetes.Interface, namespace string) (*AgentCA, error) {
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(ctx, agentpki.CAConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the agents' CA bundle, ConfigMap %s/%s (a user needs get on it, or the bundle given as a file): %w", namespace, agentpki.CAConfigMapName, err)
	}
	pool, err := agentpki.Pool([]byte(cm.Data[agentpki.CABundleKey]))
	if err != nil {
		return nil, fmt.Errorf("the agents' CA bundle in ConfigMap %s/%s: %w", namespace, agentpki.CAConfigMapName, err)
	}
	a := &AgentCA{nodeNamed: true}
	a.pool.Store(pool)
	return a, nil
}

// StaticAgentCA trusts a fixed PEM bundle (a file given to the gateway):
// another issuer's, whose certificates need not name the node.
func StaticAgentCA(bundle []byte) (*AgentCA, error) {
	pool, err := agentpki.Pool(bundle)
	if err != nil {
		return nil, err
	}
	a := &AgentCA{}
	a.pool.Store(pool)
	return a, nil
}

// tlsConfigFor verifies node's agent at host (an IP address or DNS name,
// which its certificate must name) against the current bundle. The host is
// given, not taken from the handshake: a client sends no SNI for an IP
// address, so the handshake's ServerName would be empty.
func (a *AgentCA) tlsConfigFor(node, host string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification happens in VerifyConnection, against the bundle of
		// the moment rather than one fixed when the transport was made.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			pool := a.pool.Load()
			if pool == nil {
				return errors.New("no agent CA bundle has been published yet")
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the agent presented no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				Roots: pool, Intermediates: inter, DNSName: host,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				return fmt.Errorf("the agent's certificate is not one the Playground signer issued for %s: %w", host, err)
			}
			if cn := cs.PeerCertificates[0].Subject.CommonName; a.nodeNamed && cn != agentpki.CommonName(node) {
				return fmt.Errorf("the agent at %s presented the certificate of %q, not of node %s", host, cn, node)
			}
			return nil
		},
	}
}
