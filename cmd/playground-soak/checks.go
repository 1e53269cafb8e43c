//go:build linux

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
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// sleeping returns, for each mark, the processes of the host that run
// `sleep <mark>`.
func sleeping(marks []string) map[string][]int {
	found := map[string][]int{}
	forEachProcess(func(pid int, cmdline []byte) {
		for _, m := range marks {
			if string(cmdline) == "sleep\x00"+m+"\x00" {
				found[m] = append(found[m], pid)
			}
		}
	})
	return found
}

// marked returns the processes of the host whose command line holds one
// of marks.
func marked(marks []string) []int {
	var pids []int
	forEachProcess(func(pid int, cmdline []byte) {
		for _, m := range marks {
			if bytes.Contains(cmdline, []byte(m)) {
				pids = append(pids, pid)
				return
			}
		}
	})
	return pids
}

// forEachProcess calls fn with each process of the host and its command
// line (NULs between the arguments).
func forEachProcess(fn func(pid int, cmdline []byte)) {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie or a kernel thread
		}
		fn(pid, b)
	}
}

// monitor watches, every two seconds while the soak runs: a component
// that ended on its own (outside a fault) is a violation, and is started
// again so the soak goes on; a Tenant or Sandbox not Ready, or being
// deleted, for longer than the bound is a violation, once per episode.
func (s *soak) monitor(ctx context.Context) {
	notReady := map[string]time.Time{}
	reported := map[string]bool{}
	for ctx.Err() == nil {
		sleep(ctx, 2*time.Second)
		if s.win.active() || ctx.Err() != nil {
			continue
		}
		if err := s.sys.exited(); err != nil {
			s.led.violatef(invStop, "%v", firstLine(err.Error()))
			for _, name := range components {
				if s.sys.proc(name).Exited() != nil {
					if err := s.sys.start(name); err != nil {
						s.led.violatef(invStop, "%v", err)
					}
				}
			}
			continue
		}
		seen := map[string]bool{}
		for key, why := range s.notConverged(ctx) {
			seen[key] = true
			since, ok := notReady[key]
			if !ok {
				notReady[key] = time.Now()
				continue
			}
			if time.Since(since) > s.opts.convergeBound && !reported[key] && !s.recreating(key) {
				reported[key] = true
				s.led.violatef(invConverge, "%s: %s for %s", key, why, time.Since(since).Round(time.Second))
			}
		}
		for key := range notReady {
			if !seen[key] {
				delete(notReady, key)
				delete(reported, key)
			}
		}
	}
}

// notConverged lists the Tenants and Sandboxes that are not Ready or are
// being deleted, with why; nothing when the API server does not answer.
func (s *soak) notConverged(ctx context.Context) map[string]string {
	out := map[string]string{}
	var tenants playgroundv1alpha1.TenantList
	var sandboxes playgroundv1alpha1.SandboxList
	if s.sys.c.List(ctx, &tenants, client.InNamespace(namespace)) != nil || s.sys.c.List(ctx, &sandboxes, client.InNamespace(namespace)) != nil {
		return out
	}
	for _, t := range tenants.Items {
		if t.DeletionTimestamp != nil {
			out["Tenant "+t.Name] = "being deleted"
		} else if c := meta.FindStatusCondition(t.Status.Conditions, playgroundv1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
			out["Tenant "+t.Name] = "not Ready" + condText(c)
		}
	}
	for _, sb := range sandboxes.Items {
		if sb.DeletionTimestamp != nil {
			out["Sandbox "+sb.Name] = "being deleted (phase " + string(sb.Status.Phase) + ")"
		} else if c := meta.FindStatusCondition(sb.Status.Conditions, playgroundv1alpha1.ReadyCondition); c == nil || c.Status != metav1.ConditionTrue {
			out["Sandbox "+sb.Name] = "not Ready" + condText(c)
		}
	}
	return out
}

func condText(c *metav1.Condition) string {
	if c == nil {
		return " (no Ready condition)"
	}
	return " (" + c.Reason + ": " + c.Message + ")"
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// recordEgress notes the host end of an egress sandbox's veth pair, the
// name of its nftables table too, for the leak check: found through the
// namespace the sandbox's directory holds.
func (s *soak) recordEgress(ctx context.Context, sandboxID string) {
	s.mu.Lock()
	_, done := s.egress[sandboxID]
	s.mu.Unlock()
	if done || sandboxID == "" {
		return
	}
	// "3: eth0@if45: <...": the peer is the host's link 45. (Not
	// /sys/class/net in the namespace: sysfs there is the host's.)
	netns := filepath.Join(s.sys.nodeDir, "sandboxes", sandboxID, "netns")
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+netns, "ip", "-o", "link", "show", "dev", "eth0").Output()
	if err != nil {
		return
	}
	_, after, ok := strings.Cut(string(out), "eth0@if")
	if !ok {
		return
	}
	peer, _, _ := strings.Cut(after, ":")
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		b, err := os.ReadFile(filepath.Join("/sys/class/net", l.Name(), "ifindex"))
		if err == nil && strings.TrimSpace(string(b)) == peer {
			s.mu.Lock()
			s.egress[sandboxID] = l.Name()
			s.mu.Unlock()
			return
		}
	}
}

// leaks lists what is left on the node of the soak's sandboxes. final is
// after the agent's graceful stop, which removes its warm pool too:
// nothing at all may be left. Before it (the tenants gone, the agent
// running), only the pool's blank sandboxes may be.
func (s *soak) leaks(final bool) []string {
	var found []string
	add := func(format string, args ...any) { found = append(found, fmt.Sprintf(format, args...)) }
	nodeDir := s.sys.nodeDir

	// State files: each sandbox's directory, and the record of its owner.
	records, _ := os.ReadDir(filepath.Join(nodeDir, "sandbox-ids"))
	for _, r := range records {
		add("state file %s", filepath.Join(nodeDir, "sandbox-ids", r.Name()))
	}
	dirs, _ := os.ReadDir(filepath.Join(nodeDir, "sandboxes"))
	pooled := 0
	for _, d := range dirs {
		if !final {
			if _, err := os.Stat(filepath.Join(nodeDir, "sandboxes", d.Name(), "warm")); err == nil {
				pooled++
				continue
			}
		}
		add("sandbox directory %s", filepath.Join(nodeDir, "sandboxes", d.Name()))
	}
	if pooled > warmPool {
		add("%d blank sandboxes in a warm pool of %d", pooled, warmPool)
	}
	// Processes the cancelled jobs started.
	if left := marked(s.allMarks()); len(left) > 0 {
		add("processes of cancelled jobs: %v", left)
	}
	// Egress: veth pairs and nftables tables of sandboxes that are gone.
	s.mu.Lock()
	for id, link := range s.egress {
		if _, err := os.Stat(filepath.Join(nodeDir, "sandboxes", id)); err == nil && !final {
			continue
		}
		if _, err := os.Stat(filepath.Join("/sys/class/net", link)); err == nil {
			add("network link %s of sandbox %s", link, id)
		}
		if exec.Command("nft", "list", "table", "inet", "playground_"+link).Run() == nil {
			add("nftables table inet playground_%s of sandbox %s", link, id)
		}
	}
	s.mu.Unlock()
	if !final {
		return found
	}

	// runc's containers.
	if out, err := exec.Command("runc", "--root", filepath.Join(nodeDir, "runc"), "list", "-q").Output(); err != nil {
		if _, serr := os.Stat(filepath.Join(nodeDir, "runc")); serr == nil {
			add("runc list failed: %v", err)
		}
	} else if ids := strings.Fields(string(out)); len(ids) > 0 {
		add("runc containers %v", ids)
	}
	// Processes: naming the state directory, or in the sandboxes' cgroups.
	h := sha256.Sum256([]byte(nodeDir))
	parent := "playground/" + hex.EncodeToString(h[:])[:12]
	forEachProcess(func(pid int, cmdline []byte) {
		if bytes.Contains(cmdline, []byte(nodeDir)) {
			add("process %d: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
			return
		}
		if cg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup")); err == nil && bytes.Contains(cg, []byte(parent)) {
			add("process %d in the sandboxes' cgroups: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	})
	// Cgroups under the agent's parent.
	_ = filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil //nolint:nilerr // a cgroup gone or unreadable is no leak
		}
		if strings.Count(strings.TrimPrefix(p, "/sys/fs/cgroup"), "/") > 6 {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "/"+parent) || strings.Contains(p, "/"+parent+"/") {
			add("cgroup %s", p)
			return filepath.SkipDir
		}
		return nil
	})
	// Mounts under the state directory.
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], s.sys.state) {
				add("mount %s", f[4])
			}
		}
	}
	// Loop devices backed by its files.
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, err := os.ReadFile(l); err == nil && strings.HasPrefix(string(b), s.sys.state) {
			add("loop device %s backed by %s", strings.Split(l, "/")[3], strings.TrimSpace(string(b)))
		}
	}
	return found
}
