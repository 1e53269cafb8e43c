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

// Package imagesignature verifies cosign's signatures of an image by key:
// the "simple signing" payloads cosign stores beside an image, in its
// repository, as the layers of a manifest tagged sha256-<hex>.sig, each
// payload's signature in an annotation of its layer. A signature counts
// when it verifies under a trusted public key (sigstore's
// pkg/signature) and its payload names the digest verified and the
// image's repository. Keyless signatures (a Fulcio certificate and a
// Rekor entry) are not checked: they need Sigstore's trust root
// (docs/images.md, "Signatures").
//
// Everything read is a registry's and may be hostile: each response
// (the signature manifest, each payload) is read up to MaxBytes, and at
// most MaxSignatures signatures are checked.
package imagesignature

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Cosign's layout of signatures in a registry.
const (
	// TagSuffix ends the tag of a digest's signatures: sha256-<hex>.sig.
	TagSuffix = ".sig"
	// PayloadMediaType is the media type of a signature's layer, whose
	// blob is the signed payload.
	PayloadMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the layer's signature, in base64.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
)

// Defaults of Limits.
const (
	// DefaultMaxBytes bounds each response read while fetching
	// signatures: a manifest of signatures and each payload. A payload
	// is a few hundred bytes, a manifest about 500 bytes a signature.
	DefaultMaxBytes = 64 << 10
	// DefaultMaxSignatures bounds the signatures of a digest checked.
	DefaultMaxSignatures = 16
)

// Limits bound what a verification reads of a registry.
type Limits struct {
	// MaxBytes bounds each response: the signature manifest, each
	// payload; 0: DefaultMaxBytes.
	MaxBytes int64
	// MaxSignatures bounds the signatures checked (the first of the
	// manifest's layers); 0: DefaultMaxSignatures.
	MaxSignatures int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxSignatures <= 0 {
		l.MaxSignatures = DefaultMaxSignatures
	}
	return l
}

// Key is a public key trusted to sign images.
type Key struct {
	// Name names it in results and messages.
	Name     string
	verifier signature.Verifier
}

// ParseKey reads a public key in PEM (ECDSA, Ed25519 or RSA), as cosign
// generate-key-pair writes cosign.pub; signatures are over SHA-256, as
// cosign makes them.
func ParseKey(keyName string, pemBytes []byte) (Key, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return Key{}, fmt.Errorf("key %s is not a public key in PEM: %w", keyName, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return Key{}, fmt.Errorf("key %s: %w (ECDSA, Ed25519 and RSA keys are read)", keyName, err)
	}
	return Key{Name: keyName, verifier: v}, nil
}

// Options are how Verify reaches the registry.
type Options struct {
	// Transport is the base of every request (nil: Go's default).
	Transport http.RoundTripper
	// Keychain authenticates to the registry (nil: anonymous).
	Keychain authn.Keychain
	// UserAgent is sent with every request.
	UserAgent string
	Limits
}

// Result is what Verify found.
type Result struct {
	// SignedBy are the names of the keys, in the order given, that
	// verified a signature of the digest.
	SignedBy []string
	// Found is how many signatures the registry holds for the digest
	// (the layers of its signature manifest), Checked how many of them
	// were checked.
	Found, Checked int
	// Problems say why signatures, or the manifest that holds them,
	// counted for no key: at most one a signature checked, and one for
	// the manifest.
	Problems []string
}

// Unsigned says the registry holds no signature of the digest at all.
func (r Result) Unsigned() bool { return r.Found == 0 && len(r.Problems) == 0 }

// Tag is the tag cosign stores the signatures of digest under, in repo.
func Tag(repo name.Repository, digest v1.Hash) name.Tag {
	return repo.Tag(digest.Algorithm + "-" + digest.Hex + TagSuffix)
}

// ErrTooLarge is a response past Limits.MaxBytes.
var ErrTooLarge = errors.New("response larger than the bound of a signature's")

// Verify checks the signatures the registry holds of digest, an image of
// repo, against keys. An error is the registry's (unreachable, failed, a
// refusal of credentials): the caller tries again. A signature that is
// missing, malformed or verified by none of keys is no error: Result
// says so.
func Verify(ctx context.Context, repo name.Repository, digest v1.Hash, keys []Key, o Options) (Result, error) {
	o.Limits = o.withDefaults()
	kc := o.Keychain
	if kc == nil {
		kc = authn.NewMultiKeychain()
	}
	base := o.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	opts := []remote.Option{
		remote.WithContext(ctx), remote.WithAuthFromKeychain(kc),
		remote.WithTransport(limitedTransport{base: base, max: o.MaxBytes}),
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
	}
	if o.UserAgent != "" {
		opts = append(opts, remote.WithUserAgent(o.UserAgent))
	}
	var res Result
	desc, err := remote.Get(Tag(repo, digest), opts...)
	if err != nil {
		if notFound(err) {
			return res, nil
		}
		if errors.Is(err, ErrTooLarge) {
			res.Problems = append(res.Problems, fmt.Sprintf("the signature manifest is larger than %d bytes", o.MaxBytes))
			return res, nil
		}
		return res, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("the signature manifest %s cannot be read: %v", desc.Digest, err))
		return res, nil
	}
	res.Found = len(m.Layers)
	signed := map[string]bool{}
	for i, layer := range m.Layers {
		if i == o.MaxSignatures {
			res.Problems = append(res.Problems, fmt.Sprintf("%d of %d signatures were not checked (the manager checks the first %d)", len(m.Layers)-i, len(m.Layers), o.MaxSignatures))
			break
		}
		res.Checked++
		by, problem, err := check(repo, digest, layer, keys, o.MaxBytes, opts)
		if err != nil {
			return Result{}, err
		}
		if problem != "" {
			res.Problems = append(res.Problems, fmt.Sprintf("signature %d: %s", i+1, problem))
		}
		for _, k := range by {
			signed[k] = true
		}
	}
	for _, k := range keys {
		if signed[k.Name] {
			res.SignedBy = append(res.SignedBy, k.Name)
		}
	}
	return res, nil
}

// check verifies one signature, a layer of the signature manifest: the
// keys it verifies under, when its payload names digest in repo, or why
// it counts for none; an error is the registry's.
func check(repo name.Repository, digest v1.Hash, layer v1.Descriptor, keys []Key, maxBytes int64, opts []remote.Option) ([]string, string, error) {
	if layer.MediaType != PayloadMediaType {
		return nil, fmt.Sprintf("a layer of media type %q, not a cosign signature (%s)", layer.MediaType, PayloadMediaType), nil
	}
	if layer.Size > maxBytes {
		return nil, fmt.Sprintf("a payload of %d bytes, larger than %d", layer.Size, maxBytes), nil
	}
	sig, err := base64.StdEncoding.DecodeString(layer.Annotations[SignatureAnnotation])
	switch {
	case err != nil:
		return nil, fmt.Sprintf("no signature in base64 in its %s annotation (%v)", SignatureAnnotation, err), nil
	case len(sig) == 0:
		return nil, fmt.Sprintf("no signature in base64 in its %s annotation (none)", SignatureAnnotation), nil
	}
	body, problem, err := fetchPayload(repo, layer, maxBytes, opts)
	if problem != "" || err != nil {
		return nil, problem, err
	}
	var by []string
	for _, k := range keys {
		if k.verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(body)) == nil {
			by = append(by, k.Name)
		}
	}
	if len(by) == 0 {
		return nil, "not by any of the keys tried", nil
	}
	if why := claims(repo, digest, body); why != "" {
		return nil, fmt.Sprintf("by key %s, but %s", strings.Join(by, ", "), why), nil
	}
	return by, "", nil
}

// fetchPayload reads a signature's payload, up to maxBytes, checked
// against its digest.
func fetchPayload(repo name.Repository, layer v1.Descriptor, maxBytes int64, opts []remote.Option) ([]byte, string, error) {
	l, err := remote.Layer(repo.Digest(layer.Digest.String()), opts...)
	if err != nil {
		return nil, "", err
	}
	rc, err := l.Compressed()
	if err != nil {
		if notFound(err) {
			return nil, fmt.Sprintf("its payload %s is not in the registry", layer.Digest), nil
		}
		if errors.Is(err, ErrTooLarge) {
			return nil, fmt.Sprintf("a payload larger than %d bytes", maxBytes), nil
		}
		return nil, "", err
	}
	defer func() { _ = rc.Close() }()
	body, err := io.ReadAll(io.LimitReader(rc, maxBytes+1))
	switch {
	case errors.Is(err, ErrTooLarge) || int64(len(body)) > maxBytes:
		return nil, fmt.Sprintf("a payload larger than %d bytes", maxBytes), nil
	case err != nil && strings.Contains(err.Error(), "error verifying"):
		// ggcr's check of the blob against its digest.
		return nil, fmt.Sprintf("its payload does not match its digest %s", layer.Digest), nil
	case err != nil:
		return nil, "", err
	}
	if sum := sha256.Sum256(body); layer.Digest.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != layer.Digest.Hex {
		return nil, fmt.Sprintf("its payload does not match its digest %s", layer.Digest), nil
	}
	return body, "", nil
}

// claims says why a signed payload is not a signature of digest in repo,
// or "".
func claims(repo name.Repository, digest v1.Hash, body []byte) string {
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(body, &p); err != nil {
		return fmt.Sprintf("its payload is not a cosign payload: %v", err)
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return fmt.Sprintf("its payload is of type %q, not %q", p.Critical.Type, payload.CosignSignatureType)
	}
	if got := p.Critical.Image.DockerManifestDigest; got != digest.String() {
		return fmt.Sprintf("it signs digest %q, not %s", truncate(got, 80), digest)
	}
	ref := p.Critical.Identity.DockerReference
	if !sameRepository(ref, repo) {
		return fmt.Sprintf("it signs the image as one of %q, not of %s", truncate(ref, 200), repo.Name())
	}
	return ""
}

// sameRepository says whether a payload's docker-reference (a
// repository, or a reference with a tag or digest) names repo.
func sameRepository(ref string, repo name.Repository) bool {
	if r, err := name.ParseReference(ref); err == nil && r.Context().Name() == repo.Name() {
		return true
	}
	r, err := name.NewRepository(ref)
	return err == nil && r.Name() == repo.Name()
}

// notFound says the registry has no such manifest or blob.
func notFound(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	if te.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range te.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.BlobUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// limitedTransport fails a response body read past max bytes, so that
// no read of a registry's answer while verifying is unbounded (ggcr's
// own bound of a manifest is 100 MiB).
type limitedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %d bytes: %w", req.Method, req.URL.Redacted(), resp.ContentLength, ErrTooLarge)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, ErrTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
