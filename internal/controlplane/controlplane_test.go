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
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// childEnv makes the test binary the process that starts a control plane.
const childEnv = "PG_CONTROLPLANE_CHILD"

// TestControlPlaneDiesWithItsProcess: a process that started a control
// plane is killed (SIGKILL, as a crash or the OOM killer would): its
// kube-apiserver and etcd go with it, and nothing is left holding the
// state directory's ports and files for the next start.
func TestControlPlaneDiesWithItsProcess(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		cp, err := Start(Options{NoAdmissionPolicies: true, DataDir: os.Getenv(childEnv)})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		_ = cp
		fmt.Println("ready")
		select {} // until killed
	}
	if _, err := Assets(); err != nil {
		t.Skip(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestControlPlaneDiesWithItsProcess$")
	child.Env = append(os.Environ(), childEnv+"="+filepath.Join(t.TempDir(), "etcd"))
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("the child: %q, %v", line, err)
	}
	kids := childrenOf(child.Process.Pid)
	if len(kids) < 2 {
		t.Fatalf("the child runs %v, want kube-apiserver and etcd", kids)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	deadline := time.Now().Add(time.Minute)
	for pid, name := range kids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (%d) outlived the process that started it", name, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// childrenOf maps the PIDs of parent's children to their names.
func childrenOf(parent int) map[int]string {
	out := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, not ')'.
		s := string(b)
		open, closeParen := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closeParen < open {
			continue
		}
		f := strings.Fields(s[closeParen+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == parent {
			pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
			out[pid] = s[open+1 : closeParen]
		}
	}
	return out
}

// alive says whether pid exists and is not a zombie waiting to be reaped.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// TestAPIServerRestart: kube-apiserver stopped and started again on the
// same etcd serves the objects stored before, at the same address, to a
// client made before the restart (its CA and its user still count).
func TestAPIServerRestart(t *testing.T) {
	if _, err := Assets(); err != nil {
		t.Skip(err)
	}
	cp, err := Start(Options{NoAdmissionPolicies: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	ctx := context.Background()
	if err := cp.CreateNamespaces(ctx, "before-restart"); err != nil {
		t.Fatal(err)
	}
	host := cp.Config.Host
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "before-restart"}, &ns); err == nil {
		t.Fatal("the API server still answers after StopAPIServer")
	}
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.Get(ctx, client.ObjectKey{Name: "before-restart"}, &ns); err != nil {
		t.Fatalf("after the restart, the client made before it: %v", err)
	}
	if cp.Config.Host != host {
		t.Errorf("the API server moved from %s to %s", host, cp.Config.Host)
	}
}

// TestControllerManager: a test that opts in gets what a cluster's
// controller manager does for it: an object owned by a deleted owner is
// collected, a deleted namespace goes (not left Terminating), a new
// namespace gets its default ServiceAccount, and a ResourceQuota counts.
// Its log comes out through KlogLines; the administrator's token
// authenticates as the administrator.
func TestControllerManager(t *testing.T) {
	if _, err := Assets(); err != nil {
		t.Skip(err)
	}
	cp, err := Start(Options{NoAdmissionPolicies: true, AdminToken: "admin-token-of-the-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var logged lockedLines
	kcm, err := cp.StartControllerManager(ctx, KlogLines(funcr.New(logged.add, funcr.Options{})))
	if err != nil {
		t.Fatal(err)
	}
	if !logged.has(`"source"="`) {
		t.Errorf("kube-controller-manager's log did not come through KlogLines:\n%s", logged.String())
	}

	c := cp.Client
	eventually := func(what string, done func() (bool, error)) {
		t.Helper()
		for {
			ok, err := done()
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if ok {
				return
			}
			select {
			case <-kcm.Done():
				t.Fatalf("%s: %v", what, kcm.Err())
			case <-ctx.Done():
				t.Fatalf("%s: not after three minutes\n%s", what, logged.String())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	gone := func(obj client.Object) func() (bool, error) {
		return func() (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
	}

	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owner"}}
	if err := c.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "owned", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
	}}}
	if err := c.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	eventually("the Secret owned by a deleted ConfigMap is collected", gone(owned))

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "goes"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually("a new namespace gets its default ServiceAccount", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "secrets"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/secrets": resource.MustParse("5")}}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	eventually("a ResourceQuota's usage is counted", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(quota), quota)
		_, counted := quota.Status.Used["count/secrets"]
		return err == nil && counted, err
	})
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "inside"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually("the deleted namespace goes", gone(ns))

	// The administrator's token is the administrator's.
	cfg := rest.AnonymousClientConfig(cp.Config)
	cfg.BearerToken = "admin-token-of-the-test"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != AdminUser || !slices.Contains(u.Groups, "system:masters") {
		t.Errorf("the administrator's token authenticates as %+v", u)
	}
}

// lockedLines collects log lines, safe to read while they are written.
type lockedLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lockedLines) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *lockedLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

func (l *lockedLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// TestKlogLines: a component's klog lines come out as log entries of the
// right kind, with their source; a line past the bound is cut.
func TestKlogLines(t *testing.T) {
	var got lockedLines
	w := KlogLines(funcr.New(got.add, funcr.Options{}))
	input := "I1207 08:00:00.000001   42 controllermanager.go:123] \"Starting controller\" controller=\"garbage-collector-controller\"\n" +
		"E1207 08:00:01.5   42 gc.go:9] failed to sync\n" +
		"W1207 08:00:02.000003   42 x.go:1] careful\nnot a klog line\n\n" +
		strings.Repeat("x", maxKlogLine+10) + "\n"
	// Written in pieces that split lines, as a pipe delivers them.
	for input != "" {
		n := min(7, len(input))
		if _, err := w.Write([]byte(input[:n])); err != nil {
			t.Fatal(err)
		}
		input = input[n:]
	}
	want := []string{
		`"msg"="\"Starting controller\" controller=\"garbage-collector-controller\"" "source"="controllermanager.go:123"`,
		`"msg"="failed to sync" "error"=null "source"="gc.go:9"`,
		`"msg"="careful" "severity"="warning" "source"="x.go:1"`,
		`"msg"="not a klog line"`,
	}
	if len(got.lines) != len(want)+1 {
		t.Fatalf("got %d entries, want %d:\n%s", len(got.lines), len(want)+1, got.String())
	}
	for i, w := range want {
		if !strings.Contains(got.lines[i], w) {
			t.Errorf("entry %d is %s, want it to hold %s", i, got.lines[i], w)
		}
	}
	if last := got.lines[len(want)]; !strings.Contains(last, "…(cut)") || len(last) > maxKlogLine+100 {
		t.Errorf("the long line was not cut at the bound: %d bytes", len(last))
	}
}
