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

package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestAgentHostPathPrefixes: no installation lets a FacultyBundle read a
// node path by default. A prefix the chart grants is passed to the agent
// and mounted read-only at the node's path; one that would grant the
// node's kernel views, the pod's own userland or the agent's state fails
// the rendering, saying which value.
func TestAgentHostPathPrefixes(t *testing.T) {
	for name, r := range renderings(t) {
		c := workload[appsv1.DaemonSet](t, find(t, r, "DaemonSet", "playground-agent")).Spec.Template.Spec.Containers[0]
		if v, ok := flagValue(c.Args, "faculty-host-path-prefix"); ok {
			t.Errorf("%s: the agent is granted host path prefix %s by default", name, v)
		}
		if v, _ := flagValue(c.Args, "faculty-max-build-timeout"); v != "1h" {
			t.Errorf("%s: --faculty-max-build-timeout %q, want 1h", name, v)
		}
	}

	pod := workload[appsv1.DaemonSet](t, find(t, renderHelmCustom(t), "DaemonSet", "playground-agent")).Spec.Template.Spec
	c := pod.Containers[0]
	var granted []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--faculty-host-path-prefix="); ok {
			granted = append(granted, v)
		}
	}
	if want := []string{"/opt/playground/faculties", "/srv/tools"}; !slices.Equal(granted, want) {
		t.Fatalf("granted %v, want %v", granted, want)
	}
	for _, p := range granted {
		i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == p })
		if i < 0 {
			t.Errorf("the granted prefix %s is not mounted in the agent's pod", p)
			continue
		}
		m := c.VolumeMounts[i]
		if !m.ReadOnly {
			t.Errorf("the granted prefix %s is mounted writable", p)
		}
		v := volumeByName(pod.Volumes, m.Name)
		if v == nil || v.HostPath == nil || v.HostPath.Path != p || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("the granted prefix %s is not the node's directory: %+v", p, v)
		}
	}

	for _, p := range []string{"/", "/proc/1/root", "/sys", "/dev/shm", "/etc", "/usr/local/tools", "/lib", "/tmp/tools", "/var/lib", "/var/lib/playground/faculties", "/opt/../etc", "opt/tools"} {
		cmd := exec.Command(helm(t), "template", release, filepath.Join(repoRoot(t), "charts", "playground"),
			"--set", "agent.faculties.hostPathPrefixes={/opt/tools,"+p+"}")
		cmd.Env = append(os.Environ(), helmEnv(t)...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "agent.faculties.hostPathPrefixes: ") {
			t.Errorf("prefix %s: %v, want the rendering refused\n%s", p, err, lastLines(string(out), 3))
		}
	}
}
