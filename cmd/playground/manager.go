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

package main

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/playground-dev/playground/cmd/internal/cmdflags"
	"github.com/playground-dev/playground/controllers"
	"github.com/playground-dev/playground/internal/agentlease"
	"github.com/playground-dev/playground/internal/imagesignature"
	"github.com/playground-dev/playground/mcpgateway"
)

// runManager runs the controllers until ctx ends.
func runManager(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("playground manager", flag.ContinueOnError)
	// --kubeconfig: a kubeconfig file; without it $KUBECONFIG, the in-cluster
	// configuration, then ~/.kube/config (ctrl.GetConfig's order).
	config.RegisterFlags(fs)
	metricsAddr := fs.String("metrics-bind-address", ":8080", `address of the Prometheus metrics endpoint; "0" disables it`)
	probeAddr := fs.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	pprofAddr := fs.String("pprof-bind-address", "0", pprofUsage)
	leaderElect := fs.Bool("leader-elect", false, "elect a leader among manager replicas, so that one reconciles at a time")
	leaseNamespace := fs.String("lease-namespace", agentlease.DefaultNamespace, "namespace of the agents' registration Leases and of the leader election Lease")
	workers := fs.Int("workers", controllers.DefaultWorkers, "how many Tenants, and how many Sandboxes, are reconciled at once")
	var agentUsers []string
	fs.Var(cmdflags.StringList(&agentUsers), "agent-service-account", "user name of the agents' ServiceAccount (system:serviceaccount:NAMESPACE:NAME), whose CSRs for their node's serving certificate are signed; repeatable (default: playground-agent in the lease namespace)")
	agentCertLifetime := fs.Duration("agent-cert-lifetime", controllers.DefaultAgentCertLifetime, "lifetime of the agents' serving certificates; they renew at two thirds of it")
	agentTokenFile := fs.String("agent-token-file", "", "file holding a shared bearer token to present to every host agent when it delivers signing keys and brokered egress credentials, re-read on change (as playground-dev's agents accept); default: the manager's ServiceAccount's token bound to each node")
	agentCleartext := fs.Bool("agent-cleartext", false, "reach agents whose endpoint is http:// over cleartext HTTP/2 (with --agent-token-file, for agents started with --tls=off on loopback); without it such an endpoint is refused")
	workerEndpoints := workerEndpointFlags(fs)
	registryCAFile := fs.String("image-registry-ca-file", "", "PEM file of CAs trusted, beside the system's, for the image registries the manager resolves Sandboxes' image tags with (docs/images.md)")
	var plainHTTP []string
	fs.Var(cmdflags.StringList(&plainHTTP), "image-registry-plain-http", "an image registry (host:port, or a host for any port) reached over cleartext HTTP; repeatable. Every other registry is reached over HTTPS only, so that no pull credential crosses the network in the clear")
	registryTimeout := fs.Duration("image-registry-timeout", controllers.DefaultImageTimeout, "bound of each call to an image registry")
	registryBackoff := fs.Duration("image-resolve-backoff-cap", controllers.DefaultImageRetryCap, "the longest wait before a Sandbox's image whose resolution failed is tried again (the first wait is 5s, doubled at each failure)")
	signatureBytes := fs.Int64("image-signature-max-bytes", imagesignature.DefaultMaxBytes, "the most bytes read of each registry response while checking an image's signatures (the manifest of its signatures, each signed payload): one past it refuses the signature")
	signatureCount := fs.Int("image-signature-max-count", imagesignature.DefaultMaxSignatures, "the most signatures of an image's digest checked against a TenantPolicy's keys: those past it are not checked, and the condition says so")
	credentialRefresh := fs.Duration("image-credential-refresh", controllers.DefaultImageCredentialRefresh, "how often the pull Secrets of a Sandbox are read again and, changed, handed to its node's agent (Secrets are not watched)")
	logOpts := cmdflags.LogFlags(fs, "json")
	cmdflags.VerbosityFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	endpoints, err := workerEndpoints()
	if err != nil {
		return err
	}
	log := logOpts.SetLogger()
	images := controllers.ImageOptions{PlainHTTP: plainHTTP, Timeout: *registryTimeout, RetryCap: *registryBackoff, CredentialRefresh: *credentialRefresh,
		Signatures: imagesignature.Limits{MaxBytes: *signatureBytes, MaxSignatures: *signatureCount}}
	if *registryCAFile != "" {
		if images.RootCAs, err = registryCAs(*registryCAFile); err != nil {
			return err
		}
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the client configuration: %w", err)
	}
	agents, err := managerAgentClients(ctx, cfg, *leaseNamespace, *agentTokenFile, *agentCleartext, log)
	if err != nil {
		return err
	}
	mgr, err := controllers.NewManager(cfg, controllers.ManagerOptions{
		Options:                controllers.Options{LeaseNamespace: *leaseNamespace, Workers: *workers, AgentUsers: agentUsers, AgentCertLifetime: *agentCertLifetime, WorkerEndpoints: endpoints, Owner: ownServiceAccount(log), Agents: agents, Images: images},
		MetricsBindAddress:     *metricsAddr,
		HealthProbeBindAddress: *probeAddr,
		PprofBindAddress:       *pprofAddr,
		LeaderElection:         *leaderElect,
	})
	if err != nil {
		return err
	}
	log.WithName("manager").Info("Starting the manager", "leaderElection", *leaderElect, "leaseNamespace", *leaseNamespace)
	return mgr.Start(ctx)
}

// managerAgentClients are the manager's clients of the agents' API, to
// deliver brokered egress credentials: tokens of its own ServiceAccount
// bound to each node (the agents trust it with --trusted-manager), and the
// agents' certificates checked against the CA it publishes. A manager that
// runs as no ServiceAccount delivers none (and says so on each Sandbox
// that needs it).
func managerAgentClients(ctx context.Context, cfg *rest.Config, leaseNamespace, tokenFile string, cleartext bool, log logr.Logger) (controllers.AgentClients, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ca := mcpgateway.WatchAgentCA(ctx, cs, leaseNamespace, log.WithName("agent-ca"))
	if tokenFile != "" {
		token := mcpgateway.FileToken(tokenFile, log)
		if _, err := token(); err != nil {
			return nil, fmt.Errorf("--agent-token-file: %w", err)
		}
		return mcpgateway.NewAgentClients(nil, token, ca, cleartext)
	}
	tokens, err := mcpgateway.NewServiceAccountTokens(ctx, cs, 0)
	if err != nil {
		log.Error(err, "The manager mints no tokens for the agents, so it delivers no signing keys (sandboxes that name one wait: every Tenant's does) and no brokered egress credentials; run it as its ServiceAccount, or give --agent-token-file")
		return nil, nil
	}
	agents, err := mcpgateway.NewAgentClients(tokens, nil, ca, cleartext)
	if err != nil {
		return nil, err
	}
	return agents, nil
}

// registryCAs are the system's CAs and those of the PEM file at path.
func registryCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--image-registry-ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--image-registry-ca-file: %s holds no PEM certificate", path)
	}
	return pool, nil
}
