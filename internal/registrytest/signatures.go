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

package registrytest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/playground-dev/playground/internal/imagesignature"
)

// SigningKey is a key pair a test signs images with, as cosign's
// generate-key-pair makes one (ECDSA P-256).
type SigningKey struct {
	signature.SignerVerifier
	// PublicPEM is the public key as cosign.pub holds it.
	PublicPEM string
}

// NewSigningKey generates a key pair.
func NewSigningKey(t testing.TB) SigningKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return SigningKey{SignerVerifier: sv, PublicPEM: string(pub)}
}

// Payload is the payload cosign signs for an image: its repository and
// digest (repository, ref, as "host/repo"; digest "sha256:...").
func Payload(t testing.TB, repository, digest string) []byte {
	t.Helper()
	d, err := name.NewDigest(repository + "@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	b, err := payload.Cosign{Image: d}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Signature is one layer of a signature manifest.
type Signature struct {
	Payload []byte
	// Signature goes in the layer's annotation, in base64; Raw, when
	// set, goes there as it is instead.
	Signature []byte
	Raw       *string
	// MediaType is the layer's; empty: cosign's.
	MediaType types.MediaType
}

// Sign is a signature of payload by key.
func Sign(t testing.TB, key signature.Signer, body []byte) Signature {
	t.Helper()
	sig, err := key.SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return Signature{Payload: body, Signature: sig}
}

// PushSignatures puts sigs in the registry as cosign stores the
// signatures of digest in repo: an OCI manifest tagged sha256-<hex>.sig
// whose layers are the payloads, each annotated with its signature.
func (r *Registry) PushSignatures(t testing.TB, repo, digest string, sigs ...Signature) {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, s := range sigs {
		mt := s.MediaType
		if mt == "" {
			mt = imagesignature.PayloadMediaType
		}
		ann := base64.StdEncoding.EncodeToString(s.Signature)
		if s.Raw != nil {
			ann = *s.Raw
		}
		var err error
		img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(s.Payload, mt),
			Annotations: map[string]string{imagesignature.SignatureAnnotation: ann}})
		if err != nil {
			t.Fatal(err)
		}
	}
	repository, err := name.NewRepository(r.Host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(imagesignature.Tag(repository, h), img); err != nil {
		t.Fatalf("pushing the signatures of %s: %v", digest, err)
	}
}
