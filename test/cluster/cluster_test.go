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

// Package cluster tests hack/cluster.sh, the single-node Kubernetes that
// make cluster-e2e runs on: it comes up with a Ready node, runs a pod in its
// own network namespace with an address from the pod network, and goes down
// leaving no process, mount or bridge behind. It needs root, containerd and
// the CNI plugins, and minutes to build the node's binaries the first time,
// so it runs only with PLAYGROUND_CLUSTER_TEST=1 (make cluster-e2e).
package cluster

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var root = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Join(wd, "..", "..")
}()

const (
	podCIDR = "10.88.0.0/24"
	bridge  = "pgcni0"
)

func clusterSh(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, "hack", "cluster.sh"), args...)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	t.Logf("hack/cluster.sh %s:\n%s", strings.Join(args, " "), stderr.String())
	if err != nil {
		t.Fatalf("hack/cluster.sh %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
}

func (k kubectl) run(stdin string, args ...string) (string, error) {
	cmd := exec.Command(k.bin, append([]string{"--kubeconfig", k.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (k kubectl) must(stdin string, args ...string) string {
	k.t.Helper()
	out, err := k.run(stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

const testPod = `apiVersion: v1
kind: Pod
metadata:
  name: probe
  labels: {app: probe}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: probe
    image: playground.local/busybox:cluster
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo started; busybox mkdir /www; echo ok >/www/index.html; exec busybox httpd -f -p 8080 -h /www"]
---
apiVersion: v1
kind: Service
metadata:
  name: probe
spec:
  selector: {app: probe}
  ports:
  - {port: 80, targetPort: 8080}
`

func TestClusterUpPodDown(t *testing.T) {
	if os.Getenv("PLAYGROUND_CLUSTER_TEST") != "1" {
		t.Skip("set PLAYGROUND_CLUSTER_TEST=1 (make cluster-e2e): needs root, containerd and minutes")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, as a kubelet does")
	}
	downDone := false
	t.Cleanup(func() {
		if !downDone {
			clusterSh(t, "down")
		}
	})
	start := time.Now()
	kubeconfig := clusterSh(t, "up")
	t.Logf("cluster up in %s", time.Since(start).Round(time.Second))

	k := kubectl{t: t, bin: filepath.Join(root, "bin", "k8s", "1.37.2-node", "kubectl"), kubeconfig: kubeconfig}
	k.must("", "wait", "--for=condition=Ready", "node", "--all", "--timeout=60s")

	k.must(testPod, "apply", "-f", "-")
	k.must("", "wait", "--for=condition=Ready", "pod/probe", "--timeout=120s")
	var pod struct {
		Status struct {
			Phase  string `json:"phase"`
			PodIP  string `json:"podIP"`
			HostIP string `json:"hostIP"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(k.must("", "get", "pod", "probe", "-o", "json")), &pod); err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != "Running" {
		t.Fatalf("pod phase %q, want Running", pod.Status.Phase)
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !netip.MustParsePrefix(podCIDR).Contains(ip) {
		t.Fatalf("pod IP %q is not in the pod network %s", pod.Status.PodIP, podCIDR)
	}

	// Its own network namespace, not the host's.
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	podNet := strings.TrimSpace(k.must("", "exec", "probe", "--", "/bin/busybox", "readlink", "/proc/self/ns/net"))
	if podNet == hostNet || !strings.HasPrefix(podNet, "net:[") {
		t.Fatalf("pod network namespace %q, host's %q: want a separate one", podNet, hostNet)
	}
	if logs := k.must("", "logs", "probe"); !strings.Contains(logs, "started") {
		t.Fatalf("pod logs %q, want them to say started", logs)
	}
	// The host reaches the pod on the bridge.
	if body := get(t, "http://"+netip.AddrPortFrom(ip, 8080).String()+"/"); body != "ok\n" {
		t.Errorf("the pod's web server answered %q, want ok", body)
	}

	// kube-proxy: the host reaches the pod through its Service's cluster IP,
	// and the pod reaches the apiserver through the kubernetes Service (what
	// the operator in a pod will do). No CoreDNS, so by IP.
	svcIP := strings.TrimSpace(k.must("", "get", "service", "probe", "-o", "jsonpath={.spec.clusterIP}"))
	// kube-proxy programs the Service's rules on its own schedule, after
	// the pod runs: until then the cluster IP refuses connections.
	waitConnect(t, svcIP+":80", time.Minute)
	if body := get(t, "http://"+svcIP+"/"); body != "ok\n" {
		t.Errorf("the Service %s answered %q, want ok", svcIP, body)
	}
	kubeIP := strings.TrimSpace(k.must("", "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"))
	// An HTTP request to the apiserver's TLS port gets the Go TLS server's
	// plain-text answer: proof of a connection to it, without a TLS client.
	out := k.must("", "exec", "probe", "--", "/bin/sh", "-c",
		`printf 'GET / HTTP/1.0\r\n\r\n' | busybox nc -w 5 `+kubeIP+` 443`)
	if !strings.Contains(out, "Client sent an HTTP request to an HTTPS server") {
		t.Errorf("from the pod, %s:443 answered %q, want the apiserver", kubeIP, out)
	}

	t.Run("PlaygroundImage", func(t *testing.T) { playgroundImage(t, k) })
	t.Run("Playground", func(t *testing.T) { playgroundDeployment(t, k) })

	clusterSh(t, "down")
	downDone = true
	assertNothingLeft(t)
}

// playgroundImage runs the image of make image, which hack/cluster.sh
// imports when bin/playground-image.oci.tar exists, in a Guaranteed pod:
// the QoS class whose oom_score_adj (-997) runc cannot set here without
// containerd's restrict_oom_score_adj.
func playgroundImage(t *testing.T, k kubectl) {
	if _, err := os.Stat(filepath.Join(root, "bin", "playground-image.oci.tar")); err != nil {
		t.Skip("no bin/playground-image.oci.tar (make image)")
	}
	var image string
	for _, n := range strings.Fields(k.must("", "get", "node", "-o", "jsonpath={.items[0].status.images[*].names[*]}")) {
		if strings.Contains(n, "/playground:") {
			image = n
		}
	}
	if image == "" {
		t.Fatal("the node does not list the Playground image")
	}
	k.must(`apiVersion: v1
kind: Pod
metadata:
  name: playground
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: playground
    image: `+image+`
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    resources:
      limits: {cpu: 100m, memory: 64Mi}
`, "apply", "-f", "-")
	k.must("", "wait", "--for=condition=Ready", "pod/playground", "--timeout=120s")
	if out := k.must("", "exec", "playground", "--", "playground", "--help"); !strings.Contains(out, "Usage: playground") {
		t.Errorf("playground --help in the pod said %q", out)
	}
}

// waitConnect waits until addr accepts a TCP connection, or fails the
// test after d.
func waitConnect(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s accepts no connection after %s: %v", addr, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(b)
}

// assertNothingLeft checks that no process of the cluster runs and that
// nothing it mounted or made on the host is left.
func assertNothingLeft(t *testing.T) {
	t.Helper()
	dir := filepath.Join(root, "bin", "cluster")
	if d := os.Getenv("CLUSTER_DIR"); d != "" {
		dir = d
	}
	names := map[string]bool{"etcd": true, "kube-apiserver": true, "kube-controller-manager": true,
		"kube-scheduler": true, "kubelet": true, "kube-proxy": true, "containerd": true}
	for _, p := range processes() {
		ours := strings.HasPrefix(p.exe, root+"/bin/") && names[filepath.Base(p.exe)] ||
			filepath.Base(p.exe) == "containerd" && strings.Contains(p.args, dir) ||
			strings.HasPrefix(filepath.Base(p.exe), "containerd-shim") && strings.Contains(p.args, dir)
		if ours {
			t.Errorf("left running: %s (%s)", p.proc, p.args)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			t.Errorf("left mounted: %s", f[1])
		}
	}
	if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
		t.Errorf("bridge %s left", bridge)
	}
	for _, table := range []string{"filter", "nat", "mangle"} {
		out, _ := exec.Command("iptables", "-t", table, "-S").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "KUBE-") || strings.Contains(l, "CNI-") {
				t.Errorf("iptables %s: left %q", table, l)
			}
		}
	}
}

// process is a process of the host: its /proc directory, executable and
// command line (arguments joined by spaces).
type process struct{ proc, exe, args string }

// processes lists the host's processes whose executable can be read.
func processes() []process {
	var ps []process
	exes, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range exes {
		exe, err := os.Readlink(p)
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		ps = append(ps, process{proc: filepath.Dir(p), exe: exe, args: strings.ReplaceAll(string(cmdline), "\x00", " ")})
	}
	return ps
}
