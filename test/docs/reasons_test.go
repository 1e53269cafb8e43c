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

// warningsWithoutCondition are the Warning Event reasons that no condition
// carries, each with why it needs none: what a Warning Event says of
// something that keeps an object from working is in a condition's message
// too (TestWarningsAreInConditions).
var warningsWithoutCondition = map[string]string{
	"TokenReissued":      "a repair: a new token was minted, and the Tenant works with it",
	"SigningKeyReplaced": "a repair: a new key was generated, and the Tenant works with it",
	"Restarted":          "the sandbox was started again and works; its phase and conditions say how it runs",
	"WorkerRestarted":    "the worker was started again; the WorkerMapping's status.worker counts its restarts and says how it last ended",
	"EgressDenied":       "the egress policy at work, not a refusal of the object; kubectl playground status lists the latest denials",
}

// carriers are the functions whose Reason argument becomes a condition's
// reason (or a status entry's, such as a FacultyBundle's status.nodes).
var carriers = map[string]bool{
	"Stall": true, "setConditionf": true, "setCondition": true, "condition": true,
	"setProvisioned": true, "setDelivery": true, "report": true, "reportChanged": true,
}

// TestWarningsAreInConditions: every reason of a Warning Event the code
// records is also a condition's reason (set through a metav1.Condition or
// a struct's Reason field, a carrier function, or a condition's Reason
// that the Event repeats), unless warningsWithoutCondition says why it
// needs none: a refusal that keeps an object from working is said in its
// status, where kubectl playground status shows it, not only in an Event
// that expires.
func TestWarningsAreInConditions(t *testing.T) {
	fset, files := sources(t)
	value := map[string]string{}
	for _, r := range reasons(t, fset, files) {
		value[r.name] = r.value
	}
	nameOf := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name
		case *ast.SelectorExpr:
			return e.Sel.Name
		}
		return ""
	}
	carried := map[string]bool{}
	type warning struct{ value, pos string }
	var warned []warning
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "Eventf" || fn.Name.Name == "AnnotatedEventf" {
				continue // a recorder's own methods pass reasons through
			}
			// Identifiers this function hands to a carrier: a local
			// reason variable its Event uses is carried with it.
			localCarried := map[string]bool{}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.KeyValueExpr:
					if k := nameOf(n.Key); k == "Reason" || k == "reason" {
						if v, ok := value[nameOf(n.Value)]; ok {
							carried[v] = true
						}
						localCarried[nameOf(n.Value)] = true
					}
				case *ast.CallExpr:
					if carriers[nameOf(n.Fun)] {
						for _, a := range n.Args {
							if v, ok := value[nameOf(a)]; ok {
								carried[v] = true
							}
							localCarried[nameOf(a)] = true
						}
					}
				}
				return true
			})
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				typ, rsn := -1, -1
				switch nameOf(call.Fun) {
				case "Eventf":
					typ, rsn = 2, 3
				case "AnnotatedEventf":
					typ, rsn = 3, 4
				}
				if rsn < 0 || rsn >= len(call.Args) || nameOf(call.Args[typ]) == "EventTypeNormal" {
					return true
				}
				pos := fset.Position(call.Pos()).String()
				arg := call.Args[rsn]
				switch {
				case value[nameOf(arg)] != "":
					warned = append(warned, warning{value[nameOf(arg)], pos})
				case nameOf(arg) == "Reason":
					// x.Reason: the Event repeats a condition's reason.
				case localCarried[nameOf(arg)]:
					// A variable this function also sets a condition with.
				default:
					t.Errorf("%s: a Warning Event's reason that this test cannot follow to a condition: use a Reason constant, or a variable the same function sets a condition with", pos)
				}
				return true
			})
		}
	}
	if len(warned) < 10 {
		t.Fatalf("found only %d Warning Events: the scan is broken", len(warned))
	}
	seen := map[string]bool{}
	for _, w := range warned {
		seen[w.value] = true
		if _, exempt := warningsWithoutCondition[w.value]; !carried[w.value] && !exempt {
			t.Errorf("%s: Warning Event reason %s is no condition's reason: say the cause in a condition's message too (with what to do), or list it in warningsWithoutCondition with why it needs none", w.pos, w.value)
		}
	}
	for r := range warningsWithoutCondition {
		if !seen[r] {
			t.Errorf("warningsWithoutCondition lists %s, which no Warning Event has: remove it", r)
		}
	}
}
