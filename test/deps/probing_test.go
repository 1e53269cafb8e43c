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
	"strings"
	"testing"
)

// backendPackages are the packages whose types no code outside a backend's
// constructor asserts a backend to: the backend contract and the backends.
// A backend's optional behaviour is in its Capabilities (backend.go), so
// that a wrapper of a backend passes on what it is given and a backend
// offers a behaviour on some nodes only.
var backendPackages = []string{
	module + "/hostagent/backend",
	module + "/hostagent/backend/oci",
	module + "/hostagent/backend/vm",
	module + "/hostagent/backend/jail",
	module + "/hostagent/backend/lima",
}

// TestNoProbing walks the module's code (tests apart) for a type assertion
// or a type switch to a type of the backend packages outside a backend's
// constructor (a func New* of a package under hostagent/backend): each is a
// behaviour found by probing rather than in Capabilities.
func TestNoProbing(t *testing.T) {
	for rel, src := range goFiles(t, ".", false) {
		for _, p := range probes(t, rel, src) {
			t.Errorf("%s: a type assertion to %s: a backend's optional behaviour is found in its Capabilities (hostagent/backend/backend.go), filled in by the backend; add a field there rather than probe for an interface", p.at, p.to)
		}
	}
}

// TestProbesCatch checks probes on code made up to break the rule, so that
// a walk that sees nothing fails here rather than pass for ever.
func TestProbesCatch(t *testing.T) {
	for _, tc := range []struct {
		path, src string
		want      []string
	}{
		{"hostagent/usage.go", `package hostagent
import "github.com/playground-dev/playground/hostagent/backend"
func f(be backend.Backend) { m, ok := be.(backend.UsageMeter); _, _ = m, ok }`, []string{"backend.UsageMeter"}},
		{"hostagent/nodeagent/x.go", `package nodeagent
import be "github.com/playground-dev/playground/hostagent/backend"
import "github.com/playground-dev/playground/hostagent/backend/oci"
func f(b be.Backend) {
	switch b.(type) {
	case be.EgressMeter, *oci.Backend:
	}
}`, []string{"be.EgressMeter", "*oci.Backend"}},
		{"hostagent/backend/ref.go", `package backend
func f(b Backend) { _, _ = b.(Suspender) }`, []string{"Suspender"}},
		{"hostagent/backend/vm/backend.go", `package vm
import "github.com/playground-dev/playground/hostagent/backend"
func New() { var b any; _ = b.(backend.Pauser) }`, nil},
		{"hostagent/snigate/x.go", `package snigate
import "net"
func f(c net.Conn) { _, _ = c.(interface{ CloseWrite() error }); _, _ = c.(*net.TCPConn) }`, nil},
	} {
		var got []string
		for _, p := range probes(t, tc.path, []byte(tc.src)) {
			got = append(got, p.to)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("probes in %s = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// probe is a type assertion found: where, and to what.
type probe struct{ at, to string }

// probes returns the type assertions and type switch cases of file path
// (relative to the module's root) to a type of the backend packages,
// outside a backend's constructor.
func probes(t *testing.T, path string, src []byte) []probe {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	// The names the file gives the backend packages.
	names := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !slices.Contains(backendPackages, p) {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = true
	}
	dir := filepath.ToSlash(filepath.Dir(path))
	inBackend := slices.Contains(backendPackages, module+"/"+dir)
	underBackend := strings.HasPrefix(dir, "hostagent/backend/")
	// backendType says whether e names a type of the backend packages.
	backendType := func(e ast.Expr) bool {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		switch e := e.(type) {
		case *ast.SelectorExpr:
			x, ok := e.X.(*ast.Ident)
			return ok && names[x.Name]
		case *ast.Ident:
			// An exported type of the package's own, in a backend package.
			return inBackend && ast.IsExported(e.Name)
		}
		return false
	}
	var found []probe
	add := func(e ast.Expr) {
		var b strings.Builder
		render(&b, e)
		found = append(found, probe{at: fset.Position(e.Pos()).String(), to: b.String()})
	}
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && underBackend && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "New") {
			continue // a backend's constructor fills in its Capabilities
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				if n.Type != nil && backendType(n.Type) {
					add(n.Type)
				}
			case *ast.TypeSwitchStmt:
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						if backendType(e) {
							add(e)
						}
					}
				}
			}
			return true
		})
	}
	return found
}

// render writes the type expression e as written.
func render(b *strings.Builder, e ast.Expr) {
	switch e := e.(type) {
	case *ast.StarExpr:
		b.WriteString("*")
		render(b, e.X)
	case *ast.SelectorExpr:
		render(b, e.X)
		b.WriteString("." + e.Sel.Name)
	case *ast.Ident:
		b.WriteString(e.Name)
	}
}
