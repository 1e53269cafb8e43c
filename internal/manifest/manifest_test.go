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
