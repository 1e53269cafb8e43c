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

package docs

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/cmd/kubectl-playground/kubectlplugin"
	"github.com/playground-dev/playground/internal/controlplane"
	"github.com/playground-dev/playground/internal/testbin"
	"github.com/playground-dev/playground/mcpgateway/tools"
)

// The claims of the documentation that a test can check, checked: what
// `make dev` and the agent offer by default, what the chart's values are,
// which tools exist, which egress forms are accepted. Each test reads the
// pages as a user does and the code as it runs (a binary's own -h, the
// tools an MCP client lists, the API server's validation), so that a page
// that says what is no longer so fails here.

// pages are the documentation a user reads: the README, docs/ and every
// file of examples/.
func pages(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(rel string) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = string(b)
	}
	add("README.md")
	for _, dir := range []string{"docs", "examples"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !e.IsDir() {
				add(filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

// sentences splits a page into its sentences (a period, a blank line or
// a table cell ends one), each with the line it starts on, YAML comment
// markers removed.
func sentences(page string) []sentence {
	var out []sentence
	var cur strings.Builder
	start := 0
	flush := func() {
		if s := strings.Join(strings.Fields(cur.String()), " "); s != "" {
			out = append(out, sentence{line: start, text: s})
		}
		cur.Reset()
	}
	for i, line := range strings.Split(page, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line == "" {
			flush()
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		for _, cell := range strings.Split(line, " | ") {
			for {
				dot := strings.Index(cell, ". ")
				if dot < 0 {
					break
				}
				cur.WriteString(cell[:dot+1])
				flush()
				start = i + 1
				cell = cell[dot+2:]
			}
			cur.WriteString(" " + cell)
			if strings.Contains(line, " | ") {
				flush()
				start = i + 1
			}
		}
	}
	flush()
	return out
}

type sentence struct {
	line int
	text string
}

// flagDefaults runs a binary with -h and reads its flags' defaults, as the
// flag package prints them: for each flag, its default value and what the
// usage says it amounts to ("auto: egress where this machine can",
// "default files when --tls-cert is set, else csr").
func flagDefaults(t *testing.T, bin string, args ...string) map[string][]string {
	t.Helper()
	out, _ := exec.Command(bin, append(args, "-h")...).CombinedOutput()
	defaults := map[string][]string{}
	var name, usage string
	end := func() {
		if name == "" {
			return
		}
		usage = strings.TrimSpace(usage)
		def := "" // the zero value: false, 0, ""
		if m := regexp.MustCompile(`\(default (.+)\)$`).FindStringSubmatch(usage); m != nil {
			def = m[1]
			if v, err := strconv.Unquote(m[1]); err == nil {
				def = v
			}
		}
		defaults[name] = []string{def}
		if m := regexp.MustCompile(`\b` + regexp.QuoteMeta(def) + `: ([a-z]+) where`).FindStringSubmatch(usage); def != "" && m != nil {
			defaults[name] = append(defaults[name], m[1])
		}
		if m := regexp.MustCompile(`; default .*, else ([a-z]+)$`).FindStringSubmatch(usage); def == "" && m != nil {
			defaults[name] = append(defaults[name], m[1])
		}
		name, usage = "", ""
	}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  -") {
			end()
			name, _, _ = strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			continue
		}
		if name != "" && strings.HasPrefix(line, "    \t") {
			usage += " " + strings.TrimSpace(line)
		}
	}
	end()
	if len(defaults) < 5 {
		t.Fatalf("%s %s -h printed %d flags: this test cannot read it:\n%s", bin, strings.Join(args, " "), len(defaults), out)
	}
	return defaults
}

// binaries builds playground-dev and playground and returns their flags'
// defaults: make dev's, and the agent's.
func binaries(t *testing.T) (dev, agent map[string][]string) {
	t.Helper()
	devBin, err := testbin.Build("github.com/playground-dev/playground/cmd/playground-dev")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testbin.Build("github.com/playground-dev/playground/cmd/playground")
	if err != nil {
		t.Fatal(err)
	}
	return flagDefaults(t, devBin), flagDefaults(t, bin, "agent")
}

// defaultFlags are the --name=value a sentence says are the default: the
// one nearest each "by default" or "the default" in it, within a few
// words (placeholders such as DIR apart).
func defaultFlags(text string) []flagClaim {
	var out []flagClaim
	for _, at := range regexp.MustCompile(`(?i)by default|the default`).FindAllStringIndex(text, -1) {
		best, dist := flagClaim{}, 80
		for _, m := range regexp.MustCompile("--([a-z][a-z0-9-]*)=([A-Za-z0-9._:/-]+)").FindAllStringSubmatchIndex(text, -1) {
			d := min(abs(m[0]-at[1]), abs(m[1]-at[0]))
			value := strings.TrimRight(text[m[4]:m[5]], ".,;:")
			if d < dist && strings.ToUpper(value) != value {
				best, dist = flagClaim{name: text[m[2]:m[3]], value: value}, d
			}
		}
		if best.name != "" {
			out = append(out, best)
		}
	}
	return out
}

type flagClaim struct{ name, value string }

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// flagValue is --name=value in a page, or --name value in code quotes.
var flagValue = regexp.MustCompile("--([a-z][a-z0-9-]*)[= ]([A-Za-z0-9._:/-]+)")

// TestFlagClaims: what the pages say of the defaults of `make dev`
// (playground-dev) and of the agent is what their -h says.
//
//   - `DEVFLAGS=--name=value` tells make dev to do what it would not do by
//     itself: the value is not the flag's default (a page that says to pass
//     --network=egress for egress is stale once egress is the default);
//   - a sentence that says an agent does something "by default" and names
//     one of its flags with a value names the default value;
//   - make dev's MCP endpoint, where a page names it, is at its --listen
//     default;
//   - what make dev offers (egress where the machine can, gVisor and vm):
//     its --network default offers egress, and the Makefile's dev target
//     passes runsc and the VM image.
func TestFlagClaims(t *testing.T) {
	dev, agent := binaries(t)
	devFlags := regexp.MustCompile(`DEVFLAGS=['"]?((?:--[a-z][a-z0-9-]*(?:=\S+)?\s*)+)`)
	endpoint := regexp.MustCompile(`http://127\.0\.0\.1:(\d+)/mcp`)
	listen := dev["listen"][0]
	listenPort := listen[strings.LastIndex(listen, ":")+1:]
	claims := 0
	for rel, page := range pages(t) {
		for _, s := range sentences(page) {
			at := fmt.Sprintf("%s:%d", rel, s.line)
			for _, m := range devFlags.FindAllStringSubmatch(s.text, -1) {
				for _, f := range flagValue.FindAllStringSubmatch(m[1], -1) {
					claims++
					def, ok := dev[f[1]]
					switch {
					case !ok:
						t.Errorf("%s: make dev DEVFLAGS=--%s=%s, but playground-dev has no flag --%s", at, f[1], f[2], f[1])
					case slices.Contains(def, strings.Trim(f[2], "`'\".,;)")):
						t.Errorf("%s: says to pass make dev DEVFLAGS=--%s=%s, which is what it does by default (%s): %q", at, f[1], f[2], strings.Join(def, ": "), s.text)
					}
				}
			}
			lower := strings.ToLower(s.text)
			if strings.Contains(lower, "agent") && !strings.Contains(lower, "playground-dev") {
				for _, f := range defaultFlags(s.text) {
					def, ok := agent[f.name]
					if !ok {
						continue
					}
					claims++
					if !slices.Contains(def, f.value) {
						t.Errorf("%s: says agents run with --%s=%s by default; their default is %q: %q", at, f.name, f.value, def[0], s.text)
					}
				}
			}
			if strings.Contains(s.text, "make dev") || strings.Contains(s.text, "playground-dev") {
				for _, m := range endpoint.FindAllStringSubmatch(s.text, -1) {
					claims++
					if m[1] != listenPort {
						t.Errorf("%s: names make dev's MCP endpoint on port %s; playground-dev listens on %q", at, m[1], listen)
					}
				}
			}
		}
	}
	if claims < 3 {
		t.Errorf("found %d claims of flags: the scan is broken", claims)
	}

	// What make dev offers, as examples/README.md says it.
	readme := pages(t)["examples/README.md"]
	if !strings.Contains(strings.Join(strings.Fields(readme), " "), "one agent that offers runc, gVisor and vm sandboxes and egress") {
		t.Error(`examples/README.md no longer says what make dev offers ("one agent that offers runc, gVisor and vm sandboxes and egress"): say it, or change this test with it`)
	}
	if n := dev["network"]; !slices.Contains(n, "egress") {
		t.Errorf("examples/README.md says make dev offers egress; playground-dev's --network defaults to %q", n)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	target := regexp.MustCompile(`(?ms)^dev:.*?\n\n`).FindString(string(makefile))
	for _, want := range []string{"--runsc", "vm-image"} {
		if !strings.Contains(target, want) {
			t.Errorf("examples/README.md says make dev offers gVisor and vm; its target passes no %s:\n%s", want, target)
		}
	}
}

// TestChartValueClaims: the chart's defaults as the pages give them (the
// table of docs/install.md, and "chart value X: V" or "X, on by default"
// in the examples) are values.yaml's.
func TestChartValueClaims(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "playground", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	lookup := func(key string) (string, bool) {
		var v any = values
		for _, k := range strings.Split(key, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return "", false
			}
			if v, ok = m[k]; !ok {
				return "", false
			}
		}
		switch v := v.(type) {
		case []any:
			if len(v) == 0 {
				return "[]", true
			}
		case map[string]any:
			if len(v) == 0 {
				return "{}", true
			}
		case string:
			if v == "" {
				return `""`, true
			}
			return v, true
		}
		if _, isList := v.([]any); isList {
			return "", false
		}
		if _, isMap := v.(map[string]any); isMap {
			return "", false
		}
		return fmt.Sprint(v), true
	}
	claims := 0
	check := func(at, key, want string) {
		claims++
		got, ok := lookup(key)
		switch {
		case !ok:
			t.Errorf("%s: chart value %s is no scalar of values.yaml", at, key)
		case got != want:
			t.Errorf("%s: says chart value %s defaults to %s; values.yaml has %s", at, key, want, got)
		}
	}
	all := pages(t)

	// docs/install.md's table: | `a`, `b` | `1`, `2` | what |, where every
	// default is a literal in code quotes.
	code := regexp.MustCompile("^`([^`]*)`$")
	for i, line := range strings.Split(all["docs/install.md"], "\n") {
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue
		}
		keys := strings.Split(strings.TrimSpace(cells[0]), ", ")
		defs := strings.Split(strings.TrimSpace(cells[1]), ", ")
		if len(keys) != len(defs) {
			continue
		}
		for j, k := range keys {
			km, dm := code.FindStringSubmatch(k), code.FindStringSubmatch(defs[j])
			if km == nil || dm == nil || strings.HasPrefix(km[1], ".") || strings.Contains(km[1], "*") || strings.Contains(dm[1], ":") && strings.Contains(dm[1], " ") {
				continue
			}
			check(fmt.Sprintf("docs/install.md:%d", i+1), km[1], dm[1])
		}
	}
	// The examples: "chart value agent.network: egress", "chart value
	// agent.gvisor, on by default".
	setTo := regexp.MustCompile("chart value `?([a-zA-Z.]+)`?: `?([A-Za-z0-9./-]+)`?")
	onByDefault := regexp.MustCompile("chart value `?([a-zA-Z.]+)`?, on by default")
	for rel, page := range all {
		for _, s := range sentences(page) {
			at := fmt.Sprintf("%s:%d", rel, s.line)
			for _, m := range setTo.FindAllStringSubmatch(s.text, -1) {
				if strings.Contains(strings.ToLower(s.text), "by default") || strings.Contains(strings.ToLower(s.text), "default") {
					check(at, m[1], m[2])
				}
			}
			for _, m := range onByDefault.FindAllStringSubmatch(s.text, -1) {
				check(at, m[1], "true")
			}
		}
	}
	if claims < 20 {
		t.Errorf("found %d claims of chart values: the scan is broken", claims)
	}
}

// TestToolNames: the tools the pages name are the tools the gateway
// serves, as an MCP client lists them: docs/tools.md has a section for
// each of the standard set under "The tools" and for each the extended set
// adds under "The extended tool set"; every tool name the README and
// docs/tools.md mention is one the gateway registers; "the eight" are
// eight.
func TestToolNames(t *testing.T) {
	standard, extended := registered(t, false), registered(t, true)
	var added []string
	for _, n := range extended {
		if !slices.Contains(standard, n) {
			added = append(added, n)
		}
	}
	if missing := diff(standard, extended); len(missing) > 0 {
		t.Errorf("the extended set lacks tools of the standard one: %v", missing)
	}
	all := pages(t)
	page := all["docs/tools.md"]
	sections := func(from, to string) []string {
		i, j := strings.Index(page, "\n## "+from+"\n"), strings.Index(page, "\n## "+to+"\n")
		if i < 0 || j < i {
			t.Fatalf("docs/tools.md has no section %q before %q", from, to)
		}
		var out []string
		for _, m := range regexp.MustCompile(`(?m)^### ([a-z_]+)$`).FindAllStringSubmatch(page[i:j], -1) {
			out = append(out, m[1])
		}
		return out
	}
	if got := sections("The tools", "The extended tool set"); !slices.Equal(got, standard) {
		t.Errorf("docs/tools.md describes the tools %v under \"The tools\"; the gateway serves %v", got, standard)
	}
	if got := sections("The extended tool set", "Tenant scope"); !slices.Equal(got, added) {
		t.Errorf("docs/tools.md describes the tools %v under \"The extended tool set\"; the extended set adds %v", got, added)
	}
	if len(standard) != 8 {
		t.Errorf("the pages speak of the eight tools; the gateway serves %d: %v", len(standard), standard)
	}
	// Every name of a tool's shape, but the arguments and results that
	// share it.
	toolName := regexp.MustCompile("`([a-z]+_session|job_[a-z_]+)`")
	fields := []string{"job_id"}
	for _, rel := range []string{"README.md", "docs/tools.md", "docs/operations.md"} {
		for _, s := range sentences(all[rel]) {
			for _, m := range toolName.FindAllStringSubmatch(s.text, -1) {
				if !slices.Contains(extended, m[1]) && !slices.Contains(fields, m[1]) {
					t.Errorf("%s:%d: names the tool %s, which the gateway does not serve (it serves %v)", rel, s.line, m[1], extended)
				}
			}
		}
	}
	// The README's row of the extended set names what it adds.
	for _, s := range sentences(all["README.md"]) {
		if strings.Contains(s.text, "spec.tools: extended") {
			for _, n := range added {
				if !strings.Contains(s.text, "`"+n+"`") {
					t.Errorf("README.md:%d: the extended set's row does not name %s, which it adds", s.line, n)
				}
			}
		}
	}
}

// registered lists the tools the gateway registers, standard or extended,
// as a real MCP client lists them from a server the tools package fills.
func registered(t *testing.T, extended bool) []string {
	t.Helper()
	ctx := context.Background()
	s := mcp.NewServer(&mcp.Implementation{Name: "docs-check", Version: "v0"}, nil)
	tools.Register(s, tools.Options{Router: noRoutes{}, Extended: extended})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "docs-check", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(res.Tools))
	for i, tool := range res.Tools {
		names[i] = tool.Name
	}
	// In the order docs/tools.md describes them: the package's.
	order := append(slices.Clone(tools.Names), tools.ExtendedNames...)
	slices.SortFunc(names, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) })
	return names
}

// noRoutes routes no call: listing the tools calls none.
type noRoutes struct{}

func (noRoutes) Route(context.Context, *mcp.CallToolRequest) (tools.Route, error) {
	return tools.Route{}, fmt.Errorf("no call is routed in a listing")
}

// diff is what of want got lacks.
func diff(want, got []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, w)
		}
	}
	return out
}

// TestEgressForms: every egress rule the pages show, in YAML (the
// examples, and the snippets of README.md and docs/) or as the plugin's
// --egress (in the pages and in its own help), is accepted: the YAML by
// the API server's validation, in a Tenant created with a server-side dry
// run, the flag by the plugin's parser and then the API server (tenant
// create --dry-run=server). A page that says a form is not accepted (no
// host names, IPv4 only) is wrong where the API server accepts it.
func TestEgressForms(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	accepts := func(rule map[string]any) error {
		tn := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": playgroundv1alpha1.GroupVersion.String(), "kind": "Tenant",
			"metadata": map[string]any{"namespace": "default", "name": "docs-egress"},
			"spec":     map[string]any{"sandbox": map[string]any{"network": map[string]any{"mode": "egress", "egress": []any{rule}}}},
		}}
		return cp.Client.Create(ctx, tn, client.DryRunAll)
	}
	plugin := func(args ...string) (string, error) {
		var out strings.Builder
		err := kubectlplugin.Run(ctx, append([]string{"-n", "default"}, args...), kubectlplugin.Env{Out: &out, ErrOut: &out, Config: cp.Config})
		return out.String(), err
	}

	all := pages(t)
	rules, flags := 0, 0
	for rel, page := range all {
		var docs []string
		if strings.HasSuffix(rel, ".yaml") {
			docs = strings.Split(page, "\n---\n")
		} else {
			for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(page, -1) {
				docs = append(docs, dedent(m[1]))
			}
		}
		for _, d := range docs {
			var v any
			if err := yaml.Unmarshal([]byte(d), &v); err != nil {
				t.Errorf("%s: a YAML block does not parse: %v\n%s", rel, err, d)
				continue
			}
			for _, rule := range egressRules(v) {
				rules++
				if err := accepts(rule); err != nil {
					t.Errorf("%s shows the egress rule %v, which the API server refuses: %v", rel, rule, err)
				}
			}
		}
		for _, m := range regexp.MustCompile("--egress[ =]([^\\s`|,]+)").FindAllStringSubmatch(page, -1) {
			if v := m[1]; strings.ToUpper(v) != v {
				flags++
				if out, err := plugin("tenant", "create", "docs-egress", "--egress", v, "--dry-run=server"); err != nil {
					t.Errorf("%s shows --egress %s, which the plugin or the API server refuses: %v\n%s", rel, v, err, out)
				}
			}
		}
	}
	help, err := plugin("tenant", "create", "--help")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--egress .*e\.g\. (.*)`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("tenant create --help gives no example of --egress:\n%s", help)
	}
	for _, v := range strings.Split(strings.TrimSpace(m[1]), ", ") {
		flags++
		if out, err := plugin("tenant", "create", "docs-egress", "--egress", v, "--dry-run=server"); err != nil {
			t.Errorf("tenant create --help shows --egress %s, which the plugin or the API server refuses: %v\n%s", v, err, out)
		}
	}
	if rules < 5 || flags < 3 {
		t.Errorf("found %d egress rules in YAML and %d --egress forms: the scan is broken", rules, flags)
	}

	// What a page says is refused.
	refusals := map[*regexp.Regexp]map[string]any{
		regexp.MustCompile(`(?i)no host names?|host names? (are|is) not|names are not accepted`): {"host": "pypi.org", "ports": []any{443}},
		regexp.MustCompile(`(?i)ipv4 (networks? )?only|only ipv4`):                               {"cidr": "2001:db8::/32"},
	}
	all["kubectl playground tenant create --help"] = help
	for rel, page := range all {
		for _, s := range sentences(page) {
			for re, rule := range refusals {
				if re.MatchString(s.text) && strings.Contains(strings.ToLower(s.text), "egress") || re.MatchString(s.text) && strings.HasPrefix(rel, "examples/egress") {
					if err := accepts(rule); err == nil {
						t.Errorf("%s:%d: says %q, but the API server accepts the egress rule %v", rel, s.line, re.FindString(s.text), rule)
					}
				}
			}
		}
	}
}

// egressRules finds the egress rules in a parsed YAML value: the items,
// with a cidr or a host, of every list under a key "egress".
func egressRules(v any) []map[string]any {
	var out []map[string]any
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if list, ok := x.([]any); ok && k == "egress" {
				for _, item := range list {
					if r, ok := item.(map[string]any); ok && (r["cidr"] != nil || r["host"] != nil) {
						out = append(out, r)
					}
				}
				continue
			}
			out = append(out, egressRules(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, egressRules(x)...)
		}
	}
	return out
}

// dedent removes the indentation all of a block's lines share.
func dedent(block string) string {
	lines := strings.Split(block, "\n")
	indent := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := len(l) - len(strings.TrimLeft(l, " ")); indent < 0 || n < indent {
			indent = n
		}
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
	}
	return strings.Join(lines, "\n")
}

// TestCitedTestsExist: every test the pages cite as the proof of what they
// say (`TestSigningKey`, `FuzzStringBound`) is a test of the tree.
func TestCitedTestsExist(t *testing.T) {
	declared := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && p != root:
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, "_test.go"):
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			declared[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)")
	n := 0
	for rel, page := range pages(t) {
		for _, s := range sentences(page) {
			for _, m := range cited.FindAllStringSubmatch(s.text, -1) {
				n++
				if !declared[m[1]] {
					t.Errorf("%s:%d: cites %s, which no _test.go declares", rel, s.line, m[1])
				}
			}
		}
	}
	if n < 50 {
		t.Errorf("found %d tests cited: the scan is broken", n)
	}
}
