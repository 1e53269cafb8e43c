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
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
