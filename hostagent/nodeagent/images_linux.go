//go:build linux

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

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
	"github.com/playground-dev/playground/hostagent/backend"
	"github.com/playground-dev/playground/hostagent/imagestore"
)

// StoreImages is the agent's ImageStore of a node's image store.
func StoreImages(s *imagestore.Store) ImageStore { return storeImages{s} }

type storeImages struct{ s *imagestore.Store }

func (s storeImages) Pull(ctx context.Context, ref, tenant string, kc authn.Keychain, progress func(done, total int64)) (*backend.Image, func(), error) {
	img, release, err := s.s.Get(ctx, imagestore.Request{Ref: ref, Tenant: tenant, Keychain: kc, Progress: progress})
	if err != nil {
		var refused *imagestore.RefusedError
		var denied *imagestore.DeniedError
		switch {
		case errors.As(err, &refused):
			return nil, nil, &ImageError{Reason: refused.Reason, Refused: true, Err: err}
		case errors.As(err, &denied):
			return nil, nil, &ImageError{Reason: playgroundv1alpha1.ReasonImageDenied, Err: err}
		case unreachable(err):
			// Said as such: ggcr's own words for a registry that is down
			// name a cleartext retry after an HTTPS one, which reads as a
			// TLS problem.
			registry := ref
			if d, derr := name.NewDigest(ref); derr == nil {
				registry = d.Context().RegistryStr()
			}
			return nil, nil, &ImageError{Reason: playgroundv1alpha1.ReasonImagePullFailed, Err: fmt.Errorf(
				"registry %s cannot be reached or failed, so the node cannot pull image %s: the node tries again with backoff, and the sandbox starts once the registry answers (%w)", registry, ref, err)}
		}
		return nil, nil, err
	}
	return backendImage(img), release, nil
}

// unreachable says whether a pull failed for want of a registry: no
// answer, a connection broken, or a server error (5xx).
func unreachable(err error) bool {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode >= http.StatusInternalServerError
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

func (s storeImages) Hold(digest string) (*backend.Image, func(), error) {
	img, release, err := s.s.Hold(digest)
	if err != nil {
		return nil, nil, err
	}
	return backendImage(img), release, nil
}

func backendImage(img *imagestore.Image) *backend.Image {
	return &backend.Image{Digest: img.Digest, Layers: img.Layers, Env: img.Config.Env, WorkingDir: img.Config.WorkingDir}
}
