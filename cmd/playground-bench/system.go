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
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/playground-dev/devenv"
	"github.com/playground-dev/playground/internal/machineinfo"
	"github.com/playground-dev/playground/internal/mdsection"
)

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func tokenOf(ctx context.Context, c client.Client, ns, tenant string) (string, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: playgroundv1alpha1.CredentialSecretName(tenant)}, &s); err != nil {
		return "", err
	}
	return string(s.Data[playgroundv1alpha1.CredentialTokenKey]), nil
}

func sandboxIDs(env *devenv.Env) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(env.State, "node", "sandboxes"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// unclaimed lists the sandboxes of env's node that no Sandbox names: the
// warm pool's, not claimed yet.
func unclaimed(ctx context.Context, env *devenv.Env) ([]string, error) {
	ids, err := sandboxIDs(env)
	if err != nil {
		return nil, err
	}
	var list playgroundv1alpha1.SandboxList
	if err := env.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	claimed := map[string]bool{}
	for _, sbx := range list.Items {
		claimed[sbx.Status.SandboxID] = true
	}
	return slices.DeleteFunc(ids, func(id string) bool { return claimed[id] }), nil
}

// sandboxPss sums the proportional set size of every process of the
// sandboxes ids.
func sandboxPss(env *devenv.Env, ids []string) (int64, error) {
	root := filepath.Join(env.State, "node", "runc")
	var total int64
	for _, id := range ids {
		out, err := exec.Command("runc", "--root", root, "ps", "--format", "json", "pg-"+id).Output()
		if err != nil {
			return 0, fmt.Errorf("runc ps %s: %w", id, err)
		}
		var pids []int
		if err := json.Unmarshal(out, &pids); err != nil {
			return 0, err
		}
		for _, pid := range pids {
			total += pssOf(pid)
		}
	}
	return total, nil
}

// pssOf reads a process's PSS in bytes from smaps_rollup.
func pssOf(pid int) int64 { return procKiB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:") }

// procKiB reads a size that a /proc file gives in kB ("Pss:", "VmHWM:")
// and returns it in bytes; 0 when the file or the field is missing.
func procKiB(path, field string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// destroyAll removes the bench's sandboxes, files included, so that its
// temporary state directory can go.
func destroyAll(env *devenv.Env) {
	ids, _ := sandboxIDs(env)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range ids {
		if err := env.Backend.Destroy(ctx, id, false); err != nil {
			fmt.Fprintln(os.Stderr, "removing sandbox", id, err)
		}
	}
}

func writeReport(opts options, table string) error {
	mode, cmd := "full", "make bench"
	if opts.quick {
		mode, cmd = "quick", "make bench BENCHFLAGS=--quick"
	}
	body := fmt.Sprintf(`# Benchmarks

Written by %s (%s mode) on %s.

Machine: %s. These machines are shared and noisy: every figure stands beside a
baseline measured in the same run, and the ratio is what to compare.

%s
%s%s`, "`"+cmd+"`", mode, time.Now().UTC().Format("2006-01-02 15:04 MST"), machineinfo.Describe(), table, notes, analysis)
	// make soak's section is its own: kept as it was.
	if old, err := os.ReadFile(opts.out); err == nil {
		if soak := mdsection.Get(string(old), "soak"); soak != "" {
			body = strings.TrimRight(body, "\n") + "\n\n" + soak + "\n"
		}
	}
	return os.WriteFile(opts.out, []byte(body), 0o644)
}
