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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/playground-dev/playground/internal/agentpki"
	"github.com/playground-dev/playground/internal/selfowner"
)

// Reasons of the agent certificate signer's CSR conditions and Events.
const (
	ReasonAgentCertApproved = "PlaygroundAgentCertificate"
	ReasonAgentCertDenied   = "NotThisNodesAgent"
	ReasonAgentCertFailed   = "SigningFailed"
)

// DefaultAgentCertLifetime bounds the agents' serving certificates; agents
// renew at two thirds of it.
const DefaultAgentCertLifetime = 24 * time.Hour

// AgentCertReconciler is the signer playground.dev/agent-serving: it
// approves and signs a CertificateSigningRequest for that signer only when
// its requester is an agent's ServiceAccount, with a token bound to a pod
// on the node the request names, and asks only for that node's or that
// pod's addresses; it denies every other. The node comes from the
// requester's token, as the API server recorded it in the CSR's
// spec.extra, never from the request itself.
type AgentCertReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	CA        *AgentCA
	// AgentUsers are the agents' ServiceAccount user names.
	AgentUsers []string
	// Lifetime bounds the certificates issued.
	Lifetime time.Duration
	Now      func() time.Time
}

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/status,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=playground.dev/agent-serving,verbs=approve;sign
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// +kubebuilder:rbac:groups="",namespace=playground-system,resources=pods,verbs=get

func (r *AgentCertReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var csr certificatesv1.CertificateSigningRequest
	if err := r.Client.Get(ctx, req.NamespacedName, &csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if csr.Spec.SignerName != agentpki.SignerName || len(csr.Status.Certificate) > 0 ||
		hasCondition(&csr, certificatesv1.CertificateDenied) || hasCondition(&csr, certificatesv1.CertificateFailed) {
		return ctrl.Result{}, nil
	}
	node, policyErr := r.check(ctx, &csr)
	var transient *transientError
	if errors.As(policyErr, &transient) {
		return ctrl.Result{}, transient.err
	}
	if policyErr != nil {
		if hasCondition(&csr, certificatesv1.CertificateApproved) {
			// Approved by someone else: this signer still signs only what
			// its policy allows.
			return ctrl.Result{}, r.setCondition(ctx, &csr, certificatesv1.CertificateFailed, ReasonAgentCertFailed, "Not signed: "+policyErr.Error(), false)
		}
		log.Info("Denied an agent certificate request", "csr", klog.KObj(&csr), "user", csr.Spec.Username, "reason", policyErr.Error())
		r.Recorder.Eventf(&csr, nil, corev1.EventTypeWarning, ReasonAgentCertDenied, "Deny", "Denied: %s", policyErr.Error())
		return ctrl.Result{}, r.setCondition(ctx, &csr, certificatesv1.CertificateDenied, ReasonAgentCertDenied, policyErr.Error(), true)
	}
	if !hasCondition(&csr, certificatesv1.CertificateApproved) {
		if err := r.setCondition(ctx, &csr, certificatesv1.CertificateApproved, ReasonAgentCertApproved,
			fmt.Sprintf("The agent of node %s requests its serving certificate", node), true); err != nil {
			return ctrl.Result{}, err
		}
	}
	ca, err := r.CA.Get(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	x509req, err := agentpki.ParseRequest(csr.Spec.Request)
	if err != nil {
		return ctrl.Result{}, err // checked above
	}
	lifetime := r.Lifetime
	if s := csr.Spec.ExpirationSeconds; s != nil && time.Duration(*s)*time.Second < lifetime {
		lifetime = time.Duration(*s) * time.Second
	}
	cert, err := ca.Sign(x509req, r.Now(), lifetime)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("signing: %w", err)
	}
	csr.Status.Certificate = cert
	if err := r.Client.Status().Update(ctx, &csr); err != nil {
		return ctrl.Result{}, fmt.Errorf("issuing the certificate: %w", err)
	}
	log.Info("Issued an agent serving certificate", "csr", klog.KObj(&csr), "node", node, "lifetime", lifetime.String())
	r.Recorder.Eventf(&csr, nil, corev1.EventTypeNormal, ReasonAgentCertApproved, "Sign", "Issued the serving certificate of node %s's agent", node)
	return ctrl.Result{}, nil
}

// transientError is a failure to check a request (the API server did not
// answer), retried rather than held against the requester.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }

// check applies the signer's policy and returns the node the request is
// for, or why it is refused.
func (r *AgentCertReconciler) check(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (string, error) {
	spec := &csr.Spec
	if !slices.Contains(r.AgentUsers, spec.Username) {
		return "", fmt.Errorf("%s is not an agent's ServiceAccount", spec.Username)
	}
	node, err := oneExtra(spec.Extra, agentpki.NodeNameExtra)
	if err != nil {
		return "", fmt.Errorf("the requester's token is not bound to a pod on a node: %w", err)
	}
	wantUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	for _, u := range spec.Usages {
		if !slices.Contains(wantUsages, u) && u != certificatesv1.UsageKeyEncipherment {
			return "", fmt.Errorf("usage %q is not allowed (only digital signature, key encipherment and server auth)", u)
		}
	}
	if !slices.Contains(spec.Usages, certificatesv1.UsageServerAuth) {
		return "", errors.New("usage server auth is required")
	}
	req, err := agentpki.ParseRequest(spec.Request)
	if err != nil {
		return "", fmt.Errorf("malformed request: %w", err)
	}
	allowed := []string{node}
	var n corev1.Node
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("node %s does not exist", node)
		}
		return "", &transientError{fmt.Errorf("reading node %s: %w", node, err)}
	}
	if uid, err := oneExtra(spec.Extra, agentpki.NodeUIDExtra); err == nil && uid != string(n.UID) {
		return "", fmt.Errorf("node %s is not the node the requester's token was bound to", node)
	}
	for _, a := range n.Status.Addresses {
		allowed = append(allowed, a.Address)
	}
	// Every request comes with its pod: a token bound to a Node object (or
	// a Secret) names a node but no pod, and proves no agent runs there.
	pod, err := oneExtra(spec.Extra, agentpki.PodNameExtra)
	if err != nil {
		return "", fmt.Errorf("the requester's token is bound to no pod (an agent requests with its pod's ServiceAccount token): %w", err)
	}
	uid, err := oneExtra(spec.Extra, agentpki.PodUIDExtra)
	if err != nil {
		return "", fmt.Errorf("the requester's token names no pod UID: %w", err)
	}
	// An agent user is system:serviceaccount:NAMESPACE:NAME; its pod runs
	// in that namespace.
	parts := strings.Split(spec.Username, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return "", fmt.Errorf("%s is not a ServiceAccount", spec.Username)
	}
	ns := parts[2]
	var p corev1.Pod
	switch err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod}, &p); {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("the requester's pod %s/%s does not exist", ns, pod)
	case apierrors.IsForbidden(err):
		// A deployment mistake, not an outage: say so on the CSR.
		return "", fmt.Errorf("the manager may not read the requester's pod %s/%s: run the agents in the lease namespace", ns, pod)
	case err != nil:
		return "", &transientError{fmt.Errorf("reading pod %s/%s: %w", ns, pod, err)}
	}
	if string(p.UID) != uid || p.Spec.NodeName != node {
		return "", fmt.Errorf("the requester's pod %s/%s is not the one its token was bound to on node %s", ns, pod, node)
	}
	for _, ip := range p.Status.PodIPs {
		allowed = append(allowed, ip.IP)
	}
	if err := agentpki.CheckRequest(req, node, allowed); err != nil {
		return "", err
	}
	return node, nil
}

func oneExtra(extra map[string]certificatesv1.ExtraValue, key string) (string, error) {
	v := extra[key]
	if len(v) != 1 || v[0] == "" {
		return "", fmt.Errorf("extra %s has %d values, want 1", key, len(v))
	}
	return v[0], nil
}

func hasCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// setCondition adds a condition; approval conditions (Approved, Denied) go
// through the approval subresource, Failed through status.
func (r *AgentCertReconciler) setCondition(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType, reason, msg string, approval bool) error {
	now := metav1.NewTime(r.Now())
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now,
	})
	var err error
	if approval {
		err = r.Client.SubResource("approval").Update(ctx, csr)
	} else {
		err = r.Client.Status().Update(ctx, csr)
	}
	if err != nil {
		return fmt.Errorf("setting condition %s: %w", t, err)
	}
	return nil
}

// SetupWithManager watches the CSRs of the Playground signer (the cache
// holds no other, see CacheOptions).
func (r *AgentCertReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Lifetime <= 0 {
		r.Lifetime = DefaultAgentCertLifetime
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("agentcert").
		For(&certificatesv1.CertificateSigningRequest{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.(*certificatesv1.CertificateSigningRequest).Spec.SignerName == agentpki.SignerName
		}))).
		Complete(r)
}

// AgentCA is the signer's CA: a Secret in the lease namespace that the
// first manager to need it creates, and a ConfigMap beside it publishing
// the certificate for the gateway. Loaded once per process.
type AgentCA struct {
	Client    client.Client
	APIReader client.Reader
	Namespace string
	Now       func() time.Time
	// Owner owns the Secret and the ConfigMap (package selfowner); nil
	// leaves them unowned.
	Owner *selfowner.Owner

	mu sync.Mutex
	ca *agentpki.CA
}

// +kubebuilder:rbac:groups="",namespace=playground-system,resources=configmaps,verbs=get;create;update

// Get loads the CA, creating it on first use, and makes sure it is
// published.
func (a *AgentCA) Get(ctx context.Context) (*agentpki.CA, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ca != nil {
		return a.ca, nil
	}
	ca, err := a.load(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent CA: %w", err)
	}
	if err := a.publish(ctx, ca.CertPEM); err != nil {
		return nil, fmt.Errorf("agent CA: publishing: %w", err)
	}
	a.ca = ca
	return ca, nil
}

// Start publishes the CA when the manager starts, so the gateway has the
// bundle before the first agent asks for a certificate.
func (a *AgentCA) Start(ctx context.Context) error {
	if _, err := a.Get(ctx); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Preparing the agent CA; retried on the first certificate request")
	}
	<-ctx.Done()
	return nil
}

func (a *AgentCA) labels() map[string]string {
	return map[string]string{agentpki.ComponentLabel: agentpki.ComponentValue}
}

// load reads the CA Secret (directly: the manager's cache holds only
// credential Secrets), creating it when there is none.
func (a *AgentCA) load(ctx context.Context) (*agentpki.CA, error) {
	key := types.NamespacedName{Namespace: a.Namespace, Name: agentpki.CASecretName}
	var s corev1.Secret
	err := a.APIReader.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		certPEM, keyPEM, gerr := agentpki.NewCA(a.Now())
		if gerr != nil {
			return nil, gerr
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: agentpki.CASecretName, Labels: a.labels()},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		a.Owner.Own(&s)
		err = a.Client.Create(ctx, &s)
		if apierrors.IsAlreadyExists(err) { // another replica was first
			err = a.APIReader.Get(ctx, key, &s)
		}
	}
	if err != nil {
		return nil, err
	}
	return agentpki.LoadCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
}

func (a *AgentCA) publish(ctx context.Context, certPEM []byte) error {
	key := types.NamespacedName{Namespace: a.Namespace, Name: agentpki.CAConfigMapName}
	var cm corev1.ConfigMap
	err := a.APIReader.Get(ctx, key, &cm)
	if apierrors.IsNotFound(err) {
		cm = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: agentpki.CAConfigMapName, Labels: a.labels()},
			Data:       map[string]string{agentpki.CABundleKey: string(certPEM)},
		}
		a.Owner.Own(&cm)
		return a.Client.Create(ctx, &cm)
	}
	if err != nil {
		return err
	}
	owned := a.Owner.Own(&cm)
	if !owned && strings.TrimSpace(cm.Data[agentpki.CABundleKey]) == strings.TrimSpace(string(certPEM)) {
		return nil
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[agentpki.CABundleKey] = string(certPEM)
	return a.Client.Update(ctx, &cm)
}
