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

package controlplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// ControllerManagerControllers are the controllers of kube-controller-manager
// that StartControllerManager runs: what a cluster without nodes or a cloud
// does for the objects a user of Playground creates. The rest of a
// controller manager's need nodes (pods, volumes, node lifecycle), a cloud
// or a signer of their own (the Playground signer is the manager's).
// serviceaccount-token-controller is not among them: it fills only the
// legacy token Secrets, which nothing here creates (tokens come from the
// TokenRequest API, the controllers' own included).
var ControllerManagerControllers = []string{
	// Objects go with their owner: a Tenant's Secrets when it is deleted.
	"garbage-collector-controller",
	// A deleted namespace is emptied and goes, instead of staying
	// Terminating.
	"namespace-controller",
	// Each namespace's default ServiceAccount and kube-root-ca.crt
	// ConfigMap, as a cluster's namespaces have.
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	// A ResourceQuota's usage: without it, quota admission refuses every
	// object a quota counts (docs/security.md suggests one of
	// count/tenants.playground.dev).
	"resourcequota-controller",
	// admin, edit and view filled from the roles labelled aggregate-to-*,
	// as a platform team grants a namespace's admins.
	"clusterrole-aggregation-controller",
	// The type check of admission policies, Playground's included, in
	// their status.
	"validatingadmissionpolicy-status-controller",
}

// ControllerManagerUser is the Kubernetes user kube-controller-manager
// authenticates as (a client certificate), bound by the API server's
// bootstrap RBAC to the role that lets it mint a token per controller.
const ControllerManagerUser = "system:kube-controller-manager"

// ControllerManager is a running kube-controller-manager.
type ControllerManager struct {
	cmd  *exec.Cmd
	tail *tailWriter
	done chan struct{}
	err  error
}

// Done is closed once the process has exited; Err then says why.
func (m *ControllerManager) Done() <-chan struct{} { return m.done }

// Err is why the process exited, once Done is closed.
func (m *ControllerManager) Err() error {
	select {
	case <-m.done:
		why := "exited"
		if m.err != nil {
			why = m.err.Error()
		}
		return fmt.Errorf("kube-controller-manager %s; the end of its output:\n%s", why, m.tail.String())
	default:
		return nil
	}
}

// stop ends the process (SIGTERM, then SIGKILL after a minute) and waits.
func (m *ControllerManager) stop() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(time.Minute):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// StartControllerManager runs kube-controller-manager (from the assets,
// as hack/controlplane.sh builds it) against this API server, with
// ControllerManagerControllers, each controller under its own
// ServiceAccount's token as in a cluster, and waits until it serves its
// health check. Its log goes to out (nil: discarded). It stops with the
// control plane, and dies with this process as the API server does.
//
// The test suites do not run it: it costs a process and its informers on
// every object for what few tests need. A test of garbage collection or
// namespace deletion calls this on its own control plane.
func (cp *ControlPlane) StartControllerManager(ctx context.Context, out io.Writer) (*ControllerManager, error) {
	if cp.kcm != nil {
		return nil, errors.New("kube-controller-manager already runs")
	}
	bin := filepath.Join(cp.assets, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-controller-manager is not in %s (%w): hack/controlplane.sh builds it; run it again (a control plane it built before kube-controller-manager joined gets it then)", cp.assets, err)
	}
	binaries, err := diesWithUs(cp.assets)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cp.certDir, "kube-controller-manager")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := cp.WriteUserKubeconfig(kubeconfig, ControllerManagerUser); err != nil {
		return nil, err
	}
	rootCA := filepath.Join(dir, "root-ca.crt")
	if err := os.WriteFile(rootCA, cp.Config.CAData, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = io.Discard
	}
	cmd := exec.Command(filepath.Join(binaries, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig,
		// Its port serves the health checks to anyone, the rest to no one:
		// no lookup of the API server's front proxy's CA (it has none,
		// and the controller manager would say so every few seconds).
		"--authentication-skip-lookup",
		"--authorization-kubeconfig="+kubeconfig,
		"--use-service-account-credentials",
		"--controllers="+strings.Join(ControllerManagerControllers, ","),
		"--root-ca-file="+rootCA,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(dir, "serving"),
		"--profiling=false",
	)
	// One writer for both: exec copies them in one goroutine, in order.
	tail := &tailWriter{}
	cmd.Stdout = io.MultiWriter(out, tail)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	m := &ControllerManager{cmd: cmd, tail: tail, done: make(chan struct{})}
	go func() {
		m.err = cmd.Wait()
		close(m.done)
	}()
	if err := waitHealthy(ctx, m, port); err != nil {
		m.stop()
		return nil, err
	}
	cp.kcm = m
	return m, nil
}

// waitHealthy waits until kube-controller-manager answers its /healthz
// with ok, for up to two minutes (a first start shares the machine with
// builds).
func waitHealthy(ctx context.Context, m *ControllerManager, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Its serving certificate is its own, self-signed: only whether it
	// answers matters here.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a health check of our own child on loopback
	}}
	defer hc.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(body))
		}
		select {
		case <-m.done:
			return m.Err()
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager is not healthy after two minutes: %s", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tailBytes is how much of the controller manager's output its exit
// error quotes.
const tailBytes = 2048

// tailWriter keeps the last tailBytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - tailBytes; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// freePort is a loopback port free now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// maxKlogLine bounds a line of a component's log that KlogLines keeps;
// the rest of a longer one is cut.
const maxKlogLine = 16 << 10

// klogHeader is klog's text header: severity, date, time, thread,
// source] message.
var klogHeader = regexp.MustCompile(`^([IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+ ([^\]]+)\] ?(.*)$`)

// KlogLines is a writer of a Kubernetes component's output (klog's text
// lines) that logs each line to log, so that the component's log joins the
// others': errors as errors, the rest as information with klog's severity
// and source, its own time dropped for log's.
func KlogLines(log logr.Logger) io.Writer { return &klogLines{log: log} }

type klogLines struct {
	log logr.Logger
	mu  sync.Mutex
	buf []byte
	cut bool
}

func (k *klogLines) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			k.add(p)
			break
		}
		k.add(p[:i])
		k.emit()
		p = p[i+1:]
	}
	return n, nil
}

// add appends to the line held, up to maxKlogLine.
func (k *klogLines) add(p []byte) {
	if room := maxKlogLine - len(k.buf); len(p) > room {
		p, k.cut = p[:room], true
	}
	k.buf = append(k.buf, p...)
}

func (k *klogLines) emit() {
	line := string(k.buf)
	if k.cut {
		line += "…(cut)"
	}
	k.buf, k.cut = k.buf[:0], false
	if strings.TrimSpace(line) == "" {
		return
	}
	m := klogHeader.FindStringSubmatch(line)
	switch {
	case m == nil:
		k.log.Info(line)
	case m[1] == "E" || m[1] == "F":
		k.log.Error(nil, m[3], "source", m[2])
	case m[1] == "W":
		k.log.Info(m[3], "severity", "warning", "source", m[2])
	default:
		k.log.Info(m[3], "source", m[2])
	}
}
