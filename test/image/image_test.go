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

// Package image tests the container image: that the daemonless build
// (hack/image.sh, make image) and the Dockerfile agree with each other and
// with the manifests, and that the built image is reproducible and holds
// what the agent and the sandboxes need.
package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
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

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// packages is hack/image/packages.txt, the list both builds install.
func packages(t *testing.T) []string {
	var out []string
	for _, l := range strings.Split(read(t, "hack/image/packages.txt"), "\n") {
		l, _, _ = strings.Cut(l, "#")
		out = append(out, strings.Fields(l)...)
	}
	return out
}

func match(t *testing.T, text, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no match for %q", re)
	}
	return m[1]
}

// binaries are the Go programs both builds put in /usr/local/bin.
var binaries = []string{"playground", "playground-sandbox", "kubectl-playground", "playground-example-worker"}

// TestBuildsAgree checks, without building, that the Dockerfile and
// hack/image.sh install the same package list from the same suite, build
// the same binaries the same way and put them in the same place, and that
// the image's name is the one the chart and config/ reference.
func TestBuildsAgree(t *testing.T) {
	dockerfile := read(t, "Dockerfile")
	script := read(t, "hack/image.sh")
	tool := read(t, "hack/image/main.go")

	// One package list, read by both; no package named anywhere else.
	if !strings.Contains(dockerfile, "COPY hack/image/packages.txt") || !strings.Contains(script, "hack/image/packages.txt") {
		t.Error("the Dockerfile and hack/image.sh must both install hack/image/packages.txt")
	}
	if strings.Count(dockerfile, "apt-get install") != 1 || !regexp.MustCompile(`packages.txt \| xargs env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\\n`).MatchString(dockerfile) {
		t.Error("the Dockerfile's one apt-get install must take its packages from packages.txt alone")
	}
	if s, d := match(t, script, `DEBIAN_SUITE=\$\{DEBIAN_SUITE:-(\w+)\}`), match(t, dockerfile, `ARG DEBIAN_SUITE=(\w+)`); s != d {
		t.Errorf("Debian suite: hack/image.sh %s, Dockerfile %s", s, d)
	}

	// Every host tool the agent runs comes from a listed package: the
	// Debian packages of hack/prereqs.sh's agent tools.
	pk := packages(t)
	for _, p := range []string{"runc", "e2fsprogs", "nftables", "iproute2", "util-linux", "ca-certificates", "bash", "coreutils"} {
		if !slices.Contains(pk, p) {
			t.Errorf("hack/image/packages.txt lacks %s", p)
		}
	}
	agentTools := regexp.MustCompile(`\[[\w.]+\]=([\w-]+) +# (the oci|each sandbox|egress|configuring)`).FindAllStringSubmatch(read(t, "hack/prereqs.sh"), -1)
	if len(agentTools) < 5 {
		t.Errorf("found %d of the agent's tools in hack/prereqs.sh, want 5 (runc, mkfs.ext4, nft, ip, nsenter): has its layout changed?", len(agentTools))
	}
	for _, m := range agentTools {
		if !slices.Contains(pk, m[1]) {
			t.Errorf("hack/prereqs.sh installs %s for the agent, hack/image/packages.txt does not", m[1])
		}
	}

	// The same binaries, built the same way, in the same place.
	flags := `CGO_ENABLED=0`
	build := `go build -trimpath -buildvcs=false -ldflags "-s -w -buildid="`
	for name, text := range map[string]string{"Dockerfile": dockerfile, "hack/image.sh": script} {
		if !strings.Contains(text, "for cmd in "+strings.Join(binaries, " ")+"; do") {
			t.Errorf("%s does not build %v", name, binaries)
		}
		if !strings.Contains(text, flags) || !strings.Contains(text, build) {
			t.Errorf("%s does not build with %s %s", name, flags, build)
		}
	}
	// runsc, at the version hack/runsc.sh pins, built as it builds it.
	pinned := match(t, read(t, "hack/runsc.sh"), `(?m)^RUNSC_VERSION=(\S+)$`)
	if d := match(t, dockerfile, `(?m)^ARG RUNSC_VERSION=(\S+)$`); d != pinned {
		t.Errorf("runsc: the Dockerfile builds %s, hack/runsc.sh pins %s", d, pinned)
	}
	if !strings.Contains(dockerfile, `GOFLAGS=-trimpath go install -ldflags "-s -w" "gvisor.dev/gvisor/runsc@${RUNSC_VERSION}"`) ||
		!strings.Contains(read(t, "hack/runsc.sh"), `GOFLAGS=-trimpath go install -ldflags "-s -w"`) ||
		!strings.Contains(script, `cp "$("$root/hack/runsc.sh")" "$bins/runsc"`) {
		t.Error("the Dockerfile and hack/image.sh must both ship runsc, built as hack/runsc.sh builds it")
	}
	if !strings.Contains(dockerfile, "COPY --from=build /out/ /usr/local/bin/") || !strings.Contains(tool, `const binDir = "usr/local/bin"`) {
		t.Error("the binaries must go to /usr/local/bin in both builds")
	}
	if !strings.Contains(dockerfile, `ENTRYPOINT ["/usr/local/bin/playground"]`) || !strings.Contains(tool, `cf.Config.Entrypoint = []string{"/" + binDir + "/playground"}`) {
		t.Error("the entrypoint must be /usr/local/bin/playground in both builds")
	}

	// The name: hack/image.sh tags ghcr.io/playground-dev/playground with
	// the chart's appVersion, which config/ also uses.
	chart := read(t, "charts/playground/Chart.yaml")
	app := match(t, chart, `(?m)^appVersion: "?([^"\n]+)"?$`)
	repo := match(t, read(t, "charts/playground/values.yaml"), `(?m)^  repository: (\S+)$`)
	if !strings.Contains(script, "IMAGE=${IMAGE:-"+repo+":$app_version}") {
		t.Errorf("hack/image.sh's default image is not %s:<appVersion>", repo)
	}
	for _, f := range []string{"config/agent/daemonset.yaml", "config/manager/deployment.yaml", "config/gateway/deployment.yaml"} {
		if img := match(t, read(t, f), `image: (\S+)`); img != repo+":"+app {
			t.Errorf("%s uses %s, the chart %s:%s", f, img, repo, app)
		}
	}
	if tag := match(t, read(t, "config/default/kustomization.yaml"), `newTag: (\S+)`); tag != app {
		t.Errorf("config/default sets tag %s, the chart's appVersion is %s", tag, app)
	}
}

// listing is what `hack/image list` prints.
type listing struct {
	Digest      string            `json:"digest"`
	Annotations map[string]string `json:"annotations"`
	Config      struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		Created      string `json:"created"`
		Config       struct {
			Entrypoint []string `json:"Entrypoint"`
			Cmd        []string `json:"Cmd"`
			Env        []string `json:"Env"`
		} `json:"config"`
	} `json:"config"`
	Layers [][]struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Mode     int64  `json:"mode"`
		UID      int    `json:"uid"`
		Size     int64  `json:"size"`
		Linkname string `json:"linkname"`
		ModTime  int64  `json:"mtime"`
	} `json:"layers"`
}

// build runs hack/image.sh into out and returns the digest it printed.
func build(t *testing.T, out string) string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(root, "hack", "image.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "IMAGE_OUT="+out)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/image.sh: %v\n%s", err, stdout.String())
	}
	t.Logf("hack/image.sh took %s:\n%s", time.Since(start).Round(time.Second), stdout.String())
	return match(t, stdout.String(), `(?m)^digest: +(sha256:[0-9a-f]{64})$`)
}

func fileHash(t *testing.T, p string) [32]byte {
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// TestImage builds the image twice, checks that both give the same digest
// and the same bytes, and reads its layers: the binaries, the agent's host
// tools and the sandboxes' userland are in it, with fixed owners and times.
// make image-test runs it (a cold build downloads the Debian packages);
// it is skipped unless PLAYGROUND_IMAGE_TEST=1.
func TestImage(t *testing.T) {
	if os.Getenv("PLAYGROUND_IMAGE_TEST") != "1" {
		t.Skip("builds the image twice; set PLAYGROUND_IMAGE_TEST=1 or run make image-test")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.oci.tar"), filepath.Join(dir, "b.oci.tar")
	da, db := build(t, a), build(t, b)
	if da != db {
		t.Fatalf("two builds, two digests: %s and %s", da, db)
	}
	if fileHash(t, a) != fileHash(t, b) {
		t.Fatal("two builds gave the same digest but different archives")
	}

	cmd := exec.Command("go", "run", ".", "list", a)
	cmd.Dir = filepath.Join(root, "hack", "image")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/image list: %v", err)
	}
	var l listing
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatal(err)
	}
	if l.Digest != da {
		t.Errorf("the archive's manifest is %s, the build printed %s", l.Digest, da)
	}
	app := match(t, read(t, "charts/playground/Chart.yaml"), `(?m)^appVersion: "?([^"\n]+)"?$`)
	if got, want := l.Annotations["io.containerd.image.name"], "ghcr.io/playground-dev/playground:"+app; got != want {
		t.Errorf("containerd name %q, want %q", got, want)
	}
	if got := l.Annotations["org.opencontainers.image.ref.name"]; got != app {
		t.Errorf("ref name %q, want %q", got, app)
	}
	if c := l.Config; c.OS != "linux" || !slices.Equal(c.Config.Entrypoint, []string{"/usr/local/bin/playground"}) || len(c.Config.Cmd) != 0 {
		t.Errorf("config: os %s, entrypoint %v, cmd %v", c.OS, c.Config.Entrypoint, c.Config.Cmd)
	}
	if !slices.ContainsFunc(l.Config.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") && strings.Contains(e, "/usr/sbin") }) {
		t.Errorf("PATH lacks /usr/sbin (nft, ip, mkfs.ext4): %v", l.Config.Config.Env)
	}
	if len(l.Layers) != 2 {
		t.Fatalf("%d layers, want 2 (the Debian root, the binaries)", len(l.Layers))
	}

	// Every entry of a layer: sorted, one time (the base's is that of its
	// inputs' last change, the binaries' that of the commit).
	for i, layer := range l.Layers {
		epoch := layer[0].ModTime
		for j, e := range layer {
			if j > 0 && strings.TrimSuffix(e.Name, "/") < strings.TrimSuffix(layer[j-1].Name, "/") {
				t.Errorf("layer %d: %s after %s", i, e.Name, layer[j-1].Name)
			}
			if e.ModTime != epoch {
				t.Errorf("layer %d: %s has time %d, the others %d", i, e.Name, e.ModTime, epoch)
			}
		}
	}

	// The binaries, root's, executable, in the second layer.
	got := map[string]int64{}
	for _, e := range l.Layers[1] {
		if e.Type == "0" {
			got[e.Name] = e.Mode
			if e.UID != 0 {
				t.Errorf("%s is owned by %d", e.Name, e.UID)
			}
		}
	}
	for _, b := range append(binaries, "runsc") {
		if m, ok := got["usr/local/bin/"+b]; !ok || m != 0o755 {
			t.Errorf("usr/local/bin/%s: present %v, mode %o", b, ok, m)
		}
	}

	// The agent's host tools and the sandboxes' userland, by name in any
	// of the system's bin directories (Debian 12 has /bin -> usr/bin).
	base := map[string]bool{}
	for _, e := range l.Layers[0] {
		base[e.Name] = true
	}
	for _, tool := range []string{"runc", "mkfs.ext4", "nft", "ip", "nsenter", "chattr", "cp", "sh", "bash", "env", "ls", "find", "grep", "sed", "awk", "ps", "kill", "tar", "curl"} {
		found := false
		for _, d := range []string{"usr/bin", "usr/sbin", "bin", "sbin"} {
			found = found || base[path.Join(d, tool)]
		}
		if !found {
			t.Errorf("the image has no %s", tool)
		}
	}
	for _, p := range []string{"etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/os-release"} {
		if !base[p] {
			t.Errorf("the image has no /%s", p)
		}
	}
	// Nothing that says when or where the base was made.
	for n := range base {
		if strings.HasPrefix(n, "var/log/apt/") && !strings.HasSuffix(n, "/") || n == "var/log/dpkg.log" || strings.HasPrefix(n, "var/lib/apt/lists/") && strings.Contains(n, "_") {
			t.Errorf("the base keeps %s", n)
		}
	}
}
