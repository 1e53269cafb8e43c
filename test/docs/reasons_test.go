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

// Package docs holds the documentation to the code: every condition and
// Event reason the code declares is explained in docs/troubleshooting.md,
// and the claims of the pages and the examples that a test can check are
// true (claims_test.go).
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the module's directory, from this package's.
const root = "../.."

// sourceDirs hold the components' code; every Reason constant of it is a
// condition or Event reason (tests, testdata and other modules apart).
var sourceDirs = []string{"api", "cmd", "controllers", "hostagent", "internal", "mcpgateway"}

// reason is one Reason constant: its value and where it is declared.
type reason struct {
	value, name, pos string
}

// sources parses every non-test Go file under sourceDirs, for every
// platform (a build constraint does not hide a file from the page).
func sources(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	for _, dir := range sourceDirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files = append(files, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return fset, files
}

// reasons are the Reason constants of files: constants whose name starts
// with Reason (or is ReasonX of a package), with a string value, or the
// value of another such constant.
func reasons(t *testing.T, fset *token.FileSet, files []*ast.File) []reason {
	t.Helper()
	values := map[string]string{}
	var out []reason
	var aliases []reason // name = OtherName, resolved after the pass
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
						continue
					}
					pos := fset.Position(name.Pos()).String()
					switch v := vs.Values[i].(type) {
					case *ast.BasicLit:
						s, err := strconv.Unquote(v.Value)
						if v.Kind != token.STRING || err != nil {
							t.Errorf("%s: %s is not a string constant", pos, name.Name)
							continue
						}
						values[name.Name] = s
						out = append(out, reason{value: s, name: name.Name, pos: pos})
					case *ast.Ident:
						aliases = append(aliases, reason{value: v.Name, name: name.Name, pos: pos})
					case *ast.SelectorExpr:
						aliases = append(aliases, reason{value: v.Sel.Name, name: name.Name, pos: pos})
					default:
						t.Errorf("%s: the value of %s is not a string or another reason: this test cannot read it", pos, name.Name)
					}
				}
			}
		}
	}
	for _, a := range aliases {
		v, ok := values[a.value]
		if !ok {
			t.Errorf("%s: %s = %s, which is no Reason constant this test found", a.pos, a.name, a.value)
			continue
		}
		out = append(out, reason{value: v, name: a.name, pos: a.pos})
	}
	return out
}

// TestEveryReasonIsExplained: each Reason constant's value is the reason
// cell of a row of the troubleshooting page ("| `Value` |"), not just a
// word on it (Ready and Pending are phases too).
func TestEveryReasonIsExplained(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	fset, files := sources(t)
	found := reasons(t, fset, files)
	if len(found) < 40 {
		t.Fatalf("found only %d Reason constants: the scan is broken", len(found))
	}
	var missing []string
	for _, r := range found {
		if !strings.Contains(string(page), "| `"+r.value+"` |") {
			missing = append(missing, r.value+" ("+r.name+", "+r.pos+")")
		}
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	for _, m := range missing {
		t.Errorf("docs/troubleshooting.md does not explain reason %s", m)
	}
	if !strings.Contains(string(page), "\n## Symptoms\n") {
		t.Error("docs/troubleshooting.md has no symptom index (## Symptoms)")
	}
}

// TestReasonsAreConstants: a reason written as a literal where a condition
// or Event is made would escape TestEveryReasonIsExplained, so there is
// none: metav1.Condition{Reason: "..."}, Eventf and AnnotatedEventf, and
// reconcile.Stall take a Reason constant.
func TestReasonsAreConstants(t *testing.T) {
	fset, files := sources(t)
	literal := func(e ast.Expr) bool {
		lit, ok := e.(*ast.BasicLit)
		return ok && lit.Kind == token.STRING
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Condition" {
					return true
				}
				for _, elt := range n.Elts {
					if kv, ok := elt.(*ast.KeyValueExpr); ok && isIdent(kv.Key, "Reason") && literal(kv.Value) {
						t.Errorf("%s: a condition's reason is a literal: declare a Reason constant (and explain it in docs/troubleshooting.md)", fset.Position(kv.Pos()))
					}
				}
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				case *ast.Ident:
					name = fn.Name
				}
				arg := map[string]int{"Eventf": 3, "AnnotatedEventf": 4, "Stall": 0}
				if i, ok := arg[name]; ok && i < len(n.Args) && literal(n.Args[i]) {
					t.Errorf("%s: the reason of %s is a literal: declare a Reason constant (and explain it in docs/troubleshooting.md)", fset.Position(n.Pos()), name)
				}
			}
			return true
		})
	}
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}
