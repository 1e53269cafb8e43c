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

package imagesignature

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// FuzzClaims: a signed payload is a registry's bytes; whatever they are,
// reading its claims neither panics nor accepts one that does not name,
// as cosign's type, the digest and the repository verified.
func FuzzClaims(f *testing.F) {
	const digest = "sha256:0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e0f1e"
	f.Add([]byte(`{"critical":{"identity":{"docker-reference":"registry.example.com/team/base"},"image":{"docker-manifest-digest":"` + digest + `"},"type":"cosign container image signature"},"optional":null}`))
	f.Add([]byte(`{"critical":{"identity":{"docker-reference":"registry.example.com/team/base:1@` + digest + `"},"image":{"docker-manifest-digest":"` + digest + `"},"type":"cosign container image signature"}}`))
	f.Add([]byte(`{"critical":null}`))
	f.Add([]byte(`[`))
	repo, err := name.NewRepository("registry.example.com/team/base")
	if err != nil {
		f.Fatal(err)
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		why := claims(repo, h, body)
		if why != "" {
			return
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatalf("accepted a payload that is not JSON: %q", body)
		}
		if p.Critical.Type != payload.CosignSignatureType || p.Critical.Image.DockerManifestDigest != digest ||
			!strings.HasPrefix(strings.TrimPrefix(p.Critical.Identity.DockerReference, "index.docker.io/"), "registry.example.com/team/base") {
			t.Fatalf("accepted %q", body)
		}
	})
}
