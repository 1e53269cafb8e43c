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

package backendtest

import (
	"context"
	"io"

	"github.com/playground-dev/playground/hostagent/backend"
)

// OnImage runs every sandbox it provisions or takes over on Image, as the
// agent does for a Sandbox whose spec names one: a backend's suites run
// on an image's system through it. It closes what it wraps (an
// io.Closer), as a restarted agent's process exit would.
type OnImage struct {
	backend.Backend
	Image *backend.Image
}

// Provision provisions spec on the image.
func (o OnImage) Provision(ctx context.Context, spec backend.Spec) error {
	spec.Image = o.Image
	return o.Backend.Provision(ctx, spec)
}

// Reattach takes spec over on the image.
func (o OnImage) Reattach(ctx context.Context, spec backend.Spec) error {
	spec.Image = o.Image
	return o.Backend.Reattach(ctx, spec)
}

// Close closes the wrapped backend, if it holds anything to close.
func (o OnImage) Close() error {
	if c, ok := o.Backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
