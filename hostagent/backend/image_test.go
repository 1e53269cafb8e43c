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

package backend

import (
	"strings"
	"testing"
)

// TestImageValidate: what a backend takes as an image is a sha256 digest
// and clean absolute layer directories; anything else is refused saying
// what is wrong, before a backend mounts or builds anything of it.
func TestImageValidate(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		img  *Image
		want string
	}{
		{"none", nil, ""},
		{"good", &Image{Digest: digest, Layers: []string{"/store/layers/a", "/store/layers/b"}}, ""},
		{"a tag", &Image{Digest: "latest", Layers: []string{"/a"}}, "is not sha256:<64 hex digits>"},
		{"upper-case hex", &Image{Digest: "sha256:" + strings.Repeat("AB", 32), Layers: []string{"/a"}}, "is not sha256:<64 hex digits>"},
		{"no layer", &Image{Digest: digest}, "has no layers"},
		{"a relative layer", &Image{Digest: digest, Layers: []string{"layers/a"}}, "is not a clean absolute path"},
		{"a layer with ..", &Image{Digest: digest, Layers: []string{"/store/../etc"}}, "is not a clean absolute path"},
	} {
		err := tc.img.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
