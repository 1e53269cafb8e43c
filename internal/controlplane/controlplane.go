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

// Package controlplane runs a real kube-apiserver and etcd on this machine,
// built from the Go module proxy by hack/controlplane.sh, with Playground's
// CRDs installed. The test suites and `playground-dev` both stand on it.
package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/internal/manifest"
	"github.com/playground-dev/playground/internal/scheme"
)

// modulePath identifies this repository's go.mod when looking for the root.
const modulePath = "github.com/playground-dev/playground"

// ModuleRoot returns the root of this repository, found by walking up from
// the working directory (tests run in their package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// Assets returns the directory holding kube-apiserver, etcd and kubectl:
// $KUBEBUILDER_ASSETS when set, else what hack/controlplane.sh builds (or
// finds already built) in the repository.
func Assets() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("finding the control plane: set KUBEBUILDER_ASSETS or run from the repository: %w", err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "controlplane.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/controlplane.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Options configure a control plane.
type Options struct {
	// AssetsDir holds kube-apiserver, etcd and kubectl; empty means Assets().
	AssetsDir string
	// DataDir keeps etcd's data across runs; empty means a temporary
	// directory removed on Stop.
	DataDir string
	// CRDDirs are directories of CRD manifests to install; empty means the
	// repository's config/crd/bases.
	CRDDirs []string
	// AdmissionDirs are kustomize directories of plain files of admission
	// policies to install; empty means the repository's config/admission.
	// They must hold its Tenant finalizer policy: Start returns once that
	// is in force.
	AdmissionDirs []string
	// NoAdmissionPolicies leaves them out: a cluster as the installation
	// finds it, for tests that apply the installation itself.
	NoAdmissionPolicies bool
	// AdminToken, when set, is a bearer token the API server accepts as
	// the administrator (AdminUser, in system:masters), beside the client
	// certificates: a token is what a user presents to a node's agent
	// (kubectl playground exec), which a client certificate cannot be.
	// TokenKubeconfig makes a kubeconfig of it.
	AdminToken string
}

// AdminUser is the administrator of WriteKubeconfig and Options.AdminToken.
const AdminUser = "playground-admin"

// ControlPlane is a running kube-apiserver and etcd.
type ControlPlane struct {
	env    *envtest.Environment
	assets string
	// certDir holds the API server's certificates and keys: its own, so
	// that they outlive a restart of it (RestartAPIServer).
	certDir string
	// kcm is the kube-controller-manager StartControllerManager started.
	kcm *ControllerManager
	// Config is an administrator's client configuration, and Client an
	// uncached administrator's client of Kubernetes' and Playground's
	// kinds (package scheme).
	Config *rest.Config
	Client client.Client
}

// Start runs etcd and kube-apiserver and installs the CRDs, waiting until
// they are served.
func Start(opts Options) (*ControlPlane, error) {
	assets := opts.AssetsDir
	if assets == "" {
		var err error
		if assets, err = Assets(); err != nil {
			return nil, err
		}
	}
	crds, policies := opts.CRDDirs, opts.AdmissionDirs
	if len(crds) == 0 || len(policies) == 0 {
		root, err := ModuleRoot()
		if err != nil {
			return nil, fmt.Errorf("finding the CRDs and admission policies: %w", err)
		}
		if len(crds) == 0 {
			crds = []string{filepath.Join(root, "config", "crd", "bases")}
		}
		if len(policies) == 0 {
			policies = []string{filepath.Join(root, "config", "admission")}
		}
	}
	binaries, err := diesWithUs(assets)
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: binaries,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		// The first start on a cold machine shares two cores with a build.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// The binaries by path: KUBEBUILDER_ASSETS, when set, would otherwise
	// win over BinaryAssetsDirectory.
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(binaries, "etcd")}
	// The API server's certificates in a directory of ours: envtest would
	// make new ones (a new serving CA) at each start of it, which the
	// clients of the one before would not trust.
	certDir, err := os.MkdirTemp("", "pg-apiserver-")
	if err != nil {
		return nil, err
	}
	env.ControlPlane.APIServer = &envtest.APIServer{Path: filepath.Join(binaries, "kube-apiserver"), CertDir: certDir}
	if opts.AdminToken != "" {
		if strings.ContainsAny(opts.AdminToken, ",\"\n") {
			os.RemoveAll(certDir)
			return nil, errors.New("the administrator's token must not hold a comma, a quote or a newline")
		}
		tokens := filepath.Join(certDir, "tokens.csv")
		line := fmt.Sprintf("%s,%s,%s,%s\n", opts.AdminToken, AdminUser, AdminUser, "system:masters")
		if err := os.WriteFile(tokens, []byte(line), 0o600); err != nil {
			os.RemoveAll(certDir)
			return nil, err
		}
		env.ControlPlane.APIServer.Configure().Set("token-auth-file", tokens)
	}
	if opts.DataDir != "" {
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			return nil, err
		}
		env.ControlPlane.Etcd.DataDir = opts.DataDir
	}
	cfg, err := env.Start()
	if err != nil {
		os.RemoveAll(certDir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	stop := func() error {
		err := env.Stop()
		os.RemoveAll(certDir)
		return err
	}
	// As ctrl.GetConfig does for the components in a cluster: no client-side
	// throttling (client-go's default is 5 requests a second), the API
	// server's priority and fairness protects it.
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	if !opts.NoAdmissionPolicies {
		if err := installPolicies(c, policies); err != nil {
			return nil, errors.Join(err, stop())
		}
	}
	return &ControlPlane{env: env, assets: assets, certDir: certDir, Config: cfg, Client: c}, nil
}

// diesWithUs returns a directory holding kube-apiserver and etcd as
// scripts that run those of assets and end them when this process dies,
// killed or crashed (the script finds itself reparented), so that nothing
// is left holding the state directory's ports and files for the next
// start. (The parent-death signal, prctl(PR_SET_PDEATHSIG), would do it in
// the kernel, but it is not delivered on every kernel this runs on.) A
// stop (SIGTERM, SIGINT) reaches the binary as it would without the script.
func diesWithUs(assets string) (string, error) {
	dir := filepath.Join(assets, "dies-with-parent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
		script := fmt.Sprintf(diesWithUsScript, filepath.Join(assets, name))
		path := filepath.Join(dir, name)
		if b, err := os.ReadFile(path); err == nil && string(b) == script {
			continue
		}
		tmp := fmt.Sprintf("%s.tmp.%d", path, os.Getpid())
		if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", err
		}
	}
	kubectl := filepath.Join(dir, "kubectl")
	if _, err := os.Lstat(kubectl); err != nil {
		if err := os.Symlink(filepath.Join(assets, "kubectl"), kubectl); err != nil && !os.IsExist(err) {
			return "", err
		}
	}
	return dir, nil
}

// diesWithUsScript runs the binary %s with the script's arguments and
// looks every 200 ms whether the script's parent is still the one that
// started it.
const diesWithUsScript = `#!/bin/sh
%s "$@" &
child=$!
parent=$PPID
trap 'kill -TERM $child 2>/dev/null' TERM
trap 'kill -INT $child 2>/dev/null' INT
while kill -0 $child 2>/dev/null; do
	set -- $(cat /proc/$$/stat 2>/dev/null | sed 's/.*) //')
	if [ "$2" != "$parent" ]; then
		kill -KILL $child 2>/dev/null
		exit 1
	fi
	sleep 0.2
done
wait $child
`

// installPolicies applies the admission policies of dirs, as `kubectl apply
// -k config/default` does in a cluster, and waits until the API server
// enforces them: a Tenant created (dry run) comes back with the finalizer
// that config/admission's policy adds. The API server takes a policy into
// force a moment after it is created (its admission plugin watches them).
func installPolicies(c client.Client, dirs []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dir := range dirs {
		objs, err := manifest.ReadKustomization(dir)
		if err != nil {
			return fmt.Errorf("reading the admission policies: %w", err)
		}
		if err := manifest.Apply(ctx, c, "", objs); err != nil {
			return fmt.Errorf("installing the admission policies: %w", err)
		}
	}
	for {
		probe := &playgroundv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "admission-probe"}}
		err := c.Create(ctx, probe, client.DryRunAll)
		if err == nil && slices.Contains(probe.Finalizers, playgroundv1alpha1.TenantFinalizer) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the admission policies of %s are not in force after a minute: a Tenant created (dry run) has finalizers %v (error: %v)",
				strings.Join(dirs, ", "), probe.Finalizers, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CreateNamespaces creates the namespaces that do not exist yet (the
// agents' Lease namespace, say: a cluster's installation creates it).
func (cp *ControlPlane) CreateNamespaces(ctx context.Context, names ...string) error {
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := cp.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
	}
	return nil
}

// RunTests is the TestMain of a test package whose tests share one control
// plane: it starts one, calls setup with it, runs the tests, calls the
// teardown setup returned (if any, even with an error) and stops the
// control plane. It returns
// the exit code for os.Exit; a control plane that does not start or a
// setup that fails is printed and fails the package.
func RunTests(m interface{ Run() int }, setup func(*ControlPlane) (teardown func(), err error)) int {
	cp, err := Start(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	if setup != nil {
		teardown, err := setup(cp)
		if teardown != nil {
			defer teardown()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// Assets is the directory holding kube-apiserver, etcd and kubectl.
func (cp *ControlPlane) Assets() string { return cp.assets }

// Stop ends kube-controller-manager, if it runs, kube-apiserver and etcd.
func (cp *ControlPlane) Stop() error {
	if cp.kcm != nil {
		cp.kcm.stop()
	}
	err := cp.env.Stop()
	os.RemoveAll(cp.certDir)
	return err
}

// StopAPIServer ends kube-apiserver (SIGTERM, as a rollout does) and
// leaves etcd running; StartAPIServer starts it again on the same etcd,
// address and certificates, so that the clients of the one before
// reconnect to it as to a restarted API server of a cluster.
func (cp *ControlPlane) StopAPIServer() error { return cp.env.ControlPlane.APIServer.Stop() }

// StartAPIServer starts kube-apiserver again after StopAPIServer and
// waits until it is healthy; see StopAPIServer.
func (cp *ControlPlane) StartAPIServer() error { return cp.env.ControlPlane.APIServer.Start() }

// WriteKubeconfig writes an administrator's kubeconfig to path.
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	return cp.WriteUserKubeconfig(path, AdminUser, "system:masters")
}

// TokenKubeconfig is a kubeconfig of this API server that presents token
// (Options.AdminToken, say), its one context current.
func (cp *ControlPlane) TokenKubeconfig(token string) *clientcmdapi.Config {
	const name = "playground"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthorityData: cp.Config.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: metav1.NamespaceDefault}
	kc.CurrentContext = name
	return kc
}

// WriteUserKubeconfig writes to path a kubeconfig that authenticates as
// the user name in groups (by a client certificate): what a component run
// as a process of its own presents, authorised by RBAC like in a cluster.
func (cp *ControlPlane) WriteUserKubeconfig(path, name string, groups ...string) error {
	user, err := cp.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return fmt.Errorf("adding user %s: %w", name, err)
	}
	b, err := user.KubeConfig()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// WriteImpersonatingKubeconfig writes to path an administrator's
// kubeconfig that impersonates as (a user, its groups and user extra): what
// a component run as a process of its own presents when the test needs the
// user extra of a token bound to a pod, such as an agent's node
// (authentication.kubernetes.io/node-name), which no client certificate
// can carry.
func (cp *ControlPlane) WriteImpersonatingKubeconfig(path string, as rest.ImpersonationConfig) error {
	user, err := cp.env.AddUser(envtest.User{Name: AdminUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding the administrator: %w", err)
	}
	b, err := user.KubeConfig()
	if err != nil {
		return err
	}
	kc, err := clientcmd.Load(b)
	if err != nil {
		return err
	}
	for _, ai := range kc.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups, ai.ImpersonateUserExtra = as.UserName, as.Groups, as.Extra
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// ServiceAccountConfig creates the ServiceAccount name in namespace (or
// takes the one there) and returns a client configuration that
// authenticates as it with a bearer token of an hour's life: a user with
// only the RBAC a test grants, whose token can also be presented to an
// agent, as a kubeconfig's token is.
func (cp *ControlPlane) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	_, err = cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	hour := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token of ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// Kubectl runs the control plane's kubectl with the given kubeconfig and
// returns its combined output.
func (cp *ControlPlane) Kubectl(kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(cp.assets, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), err
}
