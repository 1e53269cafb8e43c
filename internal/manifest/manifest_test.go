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

package manifest

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    []string // kind/name of each object
		wantErr string
	}{
		{name: "two documents", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n", want: []string{"ConfigMap/a", "Secret/b"}},
		{name: "empty documents are skipped", in: "---\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# only a comment\n", want: []string{"ConfigMap/a"}},
		{name: "malformed YAML names the document", in: "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: [unclosed\n", wantErr: "f.yaml: document 2"},
		{name: "missing kind", in: "apiVersion: v1\nmetadata: {name: a}\n", wantErr: "f.yaml: document 1: apiVersion and kind are required"},
		{name: "not a mapping", in: "- a\n- b\n", wantErr: "f.yaml: document 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode("f.yaml", strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzDecode: no input makes Decode panic, and every object it returns has
// an apiVersion and a kind.
func FuzzDecode(f *testing.F) {
	f.Add("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n")
	f.Add("---\n- [\n")
	f.Add("kind: X\napiVersion: y\n---\n\x00")
	f.Fuzz(func(t *testing.T, in string) {
		objs, err := Decode("fuzz", strings.NewReader(in))
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetKind() == "" || o.GetAPIVersion() == "" {
				t.Fatalf("object without apiVersion or kind from %q", in)
			}
		}
	})
}
