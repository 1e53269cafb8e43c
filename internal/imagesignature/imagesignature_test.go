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

package imagesignature_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/playground-dev/playground/internal/imagesignature"
	"github.com/playground-dev/playground/internal/registrytest"
)

// signed is an image pushed to a test registry: its repository and
// digest.
type signed struct {
	reg    *registrytest.Registry
	repo   string // under the registry
	digest string
}

func push(t *testing.T, reg *registrytest.Registry, repo, which string) signed {
	t.Helper()
	img := registrytest.Image(t, nil, registrytest.Layer(t, registrytest.Tar(t, registrytest.File("etc/os-release", "ID="+which+"\n", 0o644))))
	ref := reg.Push(t, repo, "v1", img, nil)
	return signed{reg: reg, repo: repo, digest: ref[strings.LastIndex(ref, "@")+1:]}
}

func (s signed) repository(t *testing.T) name.Repository {
	t.Helper()
	r, err := name.NewRepository(s.reg.Host + "/" + s.repo)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (s signed) verify(t *testing.T, limits imagesignature.Limits, keys ...imagesignature.Key) imagesignature.Result {
	t.Helper()
	h, err := v1.NewHash(s.digest)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := imagesignature.Verify(ctx, s.repository(t), h, keys, imagesignature.Options{Limits: limits})
	if err != nil {
		t.Fatalf("verifying %s: %v", s.digest, err)
	}
	return res
}

func key(t *testing.T, keyName string, k registrytest.SigningKey) imagesignature.Key {
	t.Helper()
	parsed, err := imagesignature.ParseKey(keyName, []byte(k.PublicPEM))
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

// TestVerify: a signature counts when it is by a trusted key and its
// payload names the digest and the repository verified; every other one
// is said, signature by signature, and none is taken for a signature.
func TestVerify(t *testing.T) {
	reg := registrytest.Start(t)
	trusted, other := registrytest.NewSigningKey(t), registrytest.NewSigningKey(t)
	keys := []imagesignature.Key{key(t, "p/trusted", trusted)}
	notBase64 := "%%%"
	for _, tc := range []struct {
		name     string
		sigs     func(s signed) []registrytest.Signature
		signedBy string
		problem  string
	}{
		{name: "signed", sigs: func(s signed) []registrytest.Signature {
			return []registrytest.Signature{registrytest.Sign(t, trusted, registrytest.Payload(t, s.reg.Host+"/"+s.repo, s.digest))}
		}, signedBy: "p/trusted"},
		{name: "unsigned"},
		{name: "another key", sigs: func(s signed) []registrytest.Signature {
			return []registrytest.Signature{registrytest.Sign(t, other, registrytest.Payload(t, s.reg.Host+"/"+s.repo, s.digest))}
		}, problem: "signature 1: not by any of the keys tried"},
		{name: "another digest", sigs: func(s signed) []registrytest.Signature {
			d := push(t, reg, "other/digest", "another").digest
			return []registrytest.Signature{registrytest.Sign(t, trusted, registrytest.Payload(t, s.reg.Host+"/"+s.repo, d))}
		}, problem: "signature 1: by key p/trusted, but it signs digest"},
		{name: "another repository", sigs: func(s signed) []registrytest.Signature {
			return []registrytest.Signature{registrytest.Sign(t, trusted, registrytest.Payload(t, s.reg.Host+"/elsewhere", s.digest))}
		}, problem: "but it signs the image as one of"},
		{name: "tampered payload", sigs: func(s signed) []registrytest.Signature {
			sig := registrytest.Sign(t, trusted, registrytest.Payload(t, s.reg.Host+"/"+s.repo, s.digest))
			sig.Payload = bytes.Replace(sig.Payload, []byte(`"optional":null`), []byte(`"optional":{"a":1}`), 1)
			return []registrytest.Signature{sig}
		}, problem: "signature 1: not by any of the keys tried"},
		{name: "not base64", sigs: func(s signed) []registrytest.Signature {
			return []registrytest.Signature{{Payload: registrytest.Payload(t, s.reg.Host+"/"+s.repo, s.digest), Raw: &notBase64}}
		}, problem: "no signature in base64"},
		{name: "another media type", sigs: func(s signed) []registrytest.Signature {
			sig := registrytest.Sign(t, trusted, registrytest.Payload(t, s.reg.Host+"/"+s.repo, s.digest))
			sig.MediaType = types.OCILayer
			return []registrytest.Signature{sig}
		}, problem: "not a cosign signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := push(t, reg, "team/"+strings.ReplaceAll(tc.name, " ", "-"), tc.name)
			if tc.sigs != nil {
				reg.PushSignatures(t, s.repo, s.digest, tc.sigs(s)...)
			}
			res := s.verify(t, imagesignature.Limits{}, keys...)
			if got := strings.Join(res.SignedBy, ","); got != tc.signedBy {
				t.Errorf("signed by %q, want %q (%+v)", got, tc.signedBy, res)
			}
			if tc.sigs == nil && !res.Unsigned() {
				t.Errorf("an image without signatures is not said to be unsigned: %+v", res)
			}
			if tc.problem != "" && !strings.Contains(strings.Join(res.Problems, "; "), tc.problem) {
				t.Errorf("problems %q, want one saying %q", res.Problems, tc.problem)
			}
		})
	}
}

// TestVerifyBounds: a payload larger than MaxBytes is not read, and
// signatures past MaxSignatures are not checked; each is said, and one
// within the bounds verifies.
func TestVerifyBounds(t *testing.T) {
	reg := registrytest.Start(t)
	trusted, other := registrytest.NewSigningKey(t), registrytest.NewSigningKey(t)
	keys := []imagesignature.Key{key(t, "p/trusted", trusted)}

	big := push(t, reg, "team/big", "big")
	body := registrytest.Payload(t, big.reg.Host+"/"+big.repo, big.digest)
	padded := append(bytes.TrimSuffix(body, []byte("}")), []byte(`,"pad":"`+strings.Repeat("x", 4096)+`"}`)...)
	reg.PushSignatures(t, big.repo, big.digest, registrytest.Sign(t, trusted, padded))
	if res := big.verify(t, imagesignature.Limits{MaxBytes: 4096}, keys...); len(res.SignedBy) != 0 || !strings.Contains(strings.Join(res.Problems, ";"), "larger than 4096") {
		t.Errorf("a payload past MaxBytes: %+v", res)
	}
	if res := big.verify(t, imagesignature.Limits{MaxBytes: 8192}, keys...); len(res.SignedBy) != 1 {
		t.Errorf("a payload within MaxBytes: %+v", res)
	}

	many := push(t, reg, "team/many", "many")
	good := registrytest.Payload(t, many.reg.Host+"/"+many.repo, many.digest)
	var sigs []registrytest.Signature
	for range 3 {
		sigs = append(sigs, registrytest.Sign(t, other, good))
	}
	reg.PushSignatures(t, many.repo, many.digest, append(sigs, registrytest.Sign(t, trusted, good))...)
	res := many.verify(t, imagesignature.Limits{MaxSignatures: 3}, keys...)
	if len(res.SignedBy) != 0 || res.Found != 4 || res.Checked != 3 || !strings.Contains(strings.Join(res.Problems, ";"), "1 of 4 signatures were not checked (the manager checks the first 3)") {
		t.Errorf("a fourth signature past MaxSignatures 3: %+v", res)
	}
	if res := many.verify(t, imagesignature.Limits{MaxSignatures: 4}, keys...); len(res.SignedBy) != 1 {
		t.Errorf("four signatures within MaxSignatures 4: %+v", res)
	}

	// A manifest of signatures past MaxBytes: refused, not read whole.
	huge := push(t, reg, "team/huge", "huge")
	pad := strings.Repeat("A", 2048)
	sigs = nil
	for range 4 {
		sigs = append(sigs, registrytest.Signature{Payload: good, Raw: &pad})
	}
	reg.PushSignatures(t, huge.repo, huge.digest, sigs...)
	if res := huge.verify(t, imagesignature.Limits{MaxBytes: 4096}, keys...); len(res.SignedBy) != 0 || !strings.Contains(strings.Join(res.Problems, ";"), "the signature manifest is larger than 4096 bytes") {
		t.Errorf("a signature manifest past MaxBytes: %+v", res)
	}
}

// TestVerifyEndlessManifest: a registry that answers the signature tag
// with a manifest that never ends is read up to MaxBytes, not further,
// and the verification ends, saying so.
func TestVerifyEndlessManifest(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.Contains(req.URL.Path, "/manifests/") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
		w.WriteHeader(http.StatusOK)
		chunk := []byte(`{"layers":[` + strings.Repeat(" ", 4096))
		for req.Context().Err() == nil && written.Load() < 64<<20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://") + "/team/endless")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := v1.NewHash("sha256:" + strings.Repeat("ab", 32))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := imagesignature.Verify(ctx, repo, h, nil, imagesignature.Options{Limits: imagesignature.Limits{MaxBytes: 8192}})
	if err != nil || !strings.Contains(strings.Join(res.Problems, ";"), "the signature manifest is larger than 8192 bytes") {
		t.Fatalf("an endless manifest: %+v, %v", res, err)
	}
	// What the server wrote before the client hung up: the bound, and
	// what the connection's buffers took.
	if w := written.Load(); w > 8<<20 {
		t.Errorf("the server wrote %d bytes before the verification stopped reading", w)
	}
}
