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

package deps

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// guestAPI is the guest protocol: the wire between the agent and the guest
// binary in a sandbox.
const guestAPI = module + "/hostagent/guestapi"

// guestSpeakers are the packages that speak the guest protocol in their
// own API: the guest binary, the protocol's own packages, and the agent's
// client of it (guestexec), which turns its messages into the types of
// the layers above (the job engine's, the backend contract's).
var guestSpeakers = []string{
	"hostagent/guest/...",
	"hostagent/guestapi/...",
	"cmd/playground-sandbox",
	"hostagent/backend/guestexec",
}

// guestBackends are the backends whose sandboxes run the guest binary:
// their own code talks to their guest, so only their exported API (what
// the kernel and the tests above see) is kept free of the protocol.
var guestBackends = []string{
	"hostagent/backend/oci/...",
	"hostagent/backend/vm/...",
	"hostagent/backend/lima/...",
	"hostagent/backend/jail/...",
	"hostagent/backend/backendtest/...",
}

// TestGuestAPIInSignatures walks the module's code (tests apart) for an
// exported identifier of the guest protocol (hostagent/guestapi) in a
// signature outside the packages that speak it: a function's or method's
// parameters and results, an exported type's definition (its exported
// fields, its interface's methods), an exported constant's or variable's
// type; in the packages above the guest's client, a function literal's
// too. The kernel, the job engine and the backend contract have their
// own types for what crosses them, so that the wire can change in one
// place, the guest's client, and old guests stay understood there.
func TestGuestAPIInSignatures(t *testing.T) {
	for rel, src := range goFiles(t, ".", false) {
		for _, u := range guestUses(t, rel, src) {
			t.Errorf("%s: %s has %s in its signature: the guest protocol (hostagent/guestapi) is spoken only by the guest and its client (hostagent/backend/guestexec); use the type of the layer that owns the idea (the job engine's, backend's) and convert in guestexec", u.at, u.in, u.what)
		}
	}
}

// TestGuestUsesCatch checks guestUses on code made up to break the rule,
// so that a walk that sees nothing fails here rather than pass for ever.
func TestGuestUsesCatch(t *testing.T) {
	const imp = `import "github.com/playground-dev/playground/hostagent/guestapi"
`
	for _, tc := range []struct {
		path, src string
		want      []string // the declarations reported
	}{
		{"hostagent/jobs/held.go", `package jobs
` + imp + `type Held interface {
	Poll(req guestapi.PollRequest) error
	Kill() error
}
type StartFunc func(spec guestapi.JobSpec) error
type Page struct {
	Exit *guestapi.Exit
	own  guestapi.Page
}
type page struct{ Exit *guestapi.Exit }
func (m *Manager) Adopt(rec []guestapi.JobRecord) {}
func (m *Manager) ended(exit *guestapi.Exit) {}
func (m *Manager) poll() { _ = guestapi.PollRequest{} }
func (m *Manager) start() { _ = func(spec guestapi.JobSpec) {} }`,
			[]string{"Held", "StartFunc", "Page", "Adopt", "ended", "a function literal in start"}},
		{"hostagent/backend/backend.go", `package backend
import g "github.com/playground-dev/playground/hostagent/guestapi"
type Stream = g.Stream
const Stdout = g.Stdout
const maxAnswer = 2*g.MaxFilePath + 256
var Out g.Stream
type Holder interface{ List() (map[string]g.JobRecord, error) }`,
			[]string{"Stream", "Stdout", "Out", "Holder"}},
		{"hostagent/backend/oci/exec.go", `package oci
` + imp + `type Backend struct{ exit guestapi.Exit }
type Process struct{ Exit guestapi.Exit }
func (b *Backend) spec() guestapi.JobSpec { return guestapi.JobSpec{} }
func (b *Backend) Spec() guestapi.JobSpec { return guestapi.JobSpec{} }
func (p *process) Exit() guestapi.Exit { return guestapi.Exit{} }
func (b *Backend) Start() { _ = func(spec guestapi.JobSpec) {} }`,
			[]string{"Process", "Spec"}},
		{"hostagent/backend/guestexec/job.go", `package guestexec
` + imp + `func (j *Job) Poll(req guestapi.PollRequest) {}`, nil},
		{"hostagent/guest/job.go", `package guest
` + imp + `func Hold(spec guestapi.JobSpec) {}`, nil},
		{"hostagent/exec.go", `package hostagent
import "github.com/playground-dev/playground/hostagent/guestapi/outring"
func f(c outring.Chunk) {}`, nil},
	} {
		var got []string
		for _, u := range guestUses(t, tc.path, []byte(tc.src)) {
			got = append(got, u.in)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("guestUses in %s = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// guestUse is a declaration with the guest protocol in its signature.
type guestUse struct{ at, in, what string }

// guestUses returns the declarations of file path (relative to the
// module's root) that have an identifier of the guest protocol in their
// signature, outside the packages that speak it.
func guestUses(t *testing.T, path string, src []byte) []guestUse {
	t.Helper()
	dir := filepath.ToSlash(filepath.Dir(path))
	in := func(patterns []string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, module+"/"+dir) })
	}
	if in(guestSpeakers) {
		return nil
	}
	exportedOnly := in(guestBackends)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	names := map[string]bool{}
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == guestAPI {
			name := "guestapi"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = true
		}
	}
	if len(names) == 0 {
		return nil
	}
	var found []guestUse
	// check reports the first identifier of the protocol in n, if any.
	check := func(decl string, nodes ...ast.Node) {
		for _, n := range nodes {
			var hit *ast.SelectorExpr
			ast.Inspect(n, func(n ast.Node) bool {
				if hit != nil {
					return false
				}
				if s, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := s.X.(*ast.Ident); ok && names[x.Name] && ast.IsExported(s.Sel.Name) {
						hit = s
						return false
					}
				}
				return true
			})
			if hit != nil {
				found = append(found, guestUse{at: fset.Position(hit.Pos()).String(), in: decl, what: hit.X.(*ast.Ident).Name + "." + hit.Sel.Name})
				return
			}
		}
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if exportedOnly && (!d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv)) {
				continue
			}
			var nodes []ast.Node
			if d.Recv != nil {
				nodes = append(nodes, d.Recv)
			}
			nodes = append(nodes, d.Type)
			check(d.Name.Name, nodes...)
			if d.Body != nil && !exportedOnly {
				// The functions it makes (a start func, say) are
				// the package's own signatures too.
				ast.Inspect(d.Body, func(n ast.Node) bool {
					if lit, ok := n.(*ast.FuncLit); ok {
						check("a function literal in "+d.Name.Name, lit.Type)
					}
					return true
				})
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					check(s.Name.Name, exportedParts(s.Type)...)
				case *ast.ValueSpec:
					i := slices.IndexFunc(s.Names, (*ast.Ident).IsExported)
					if i < 0 {
						continue
					}
					var nodes []ast.Node
					if s.Type != nil {
						nodes = append(nodes, s.Type)
					}
					for _, v := range s.Values {
						// A value that is the protocol's own (an
						// alias of its constant) carries its type.
						if sel, ok := v.(*ast.SelectorExpr); ok {
							nodes = append(nodes, sel)
						}
					}
					check(s.Names[i].Name, nodes...)
				}
			}
		}
	}
	return found
}

// exportedParts is what of an exported type's definition its users see:
// a struct's exported (and embedded) fields, an interface's methods and
// embedded interfaces, or the whole of any other type.
func exportedParts(e ast.Expr) []ast.Node {
	st, ok := e.(*ast.StructType)
	if !ok {
		return []ast.Node{e}
	}
	var parts []ast.Node
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 || slices.ContainsFunc(f.Names, (*ast.Ident).IsExported) {
			parts = append(parts, f.Type)
		}
	}
	return parts
}

// exportedRecv says whether a method's receiver is an exported type.
func exportedRecv(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	e := recv.List[0].Type
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}
