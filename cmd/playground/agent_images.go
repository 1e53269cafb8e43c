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

package main

import (
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// defaultImageCheckTTL is how long a registry's yes to a tenant's pull
// of a cached private image is trusted (the store's default).
const defaultImageCheckTTL = 15 * time.Minute

// imageStoreFlags are the agent's flags of its node's image store.
type imageStoreFlags struct {
	dir, bytes, layerBytes, caFile string
	checkTTL                       time.Duration
	plainHTTP                      []string
}

// imageStoreSettings are the flags checked.
type imageStoreSettings struct {
	dir               string
	bytes, layerBytes int64
}

// settings checks the flags; the store's directory defaults under
// stateDir.
func (f imageStoreFlags) settings(stateDir string) (imageStoreSettings, error) {
	s := imageStoreSettings{dir: f.dir}
	if s.dir == "" {
		s.dir = filepath.Join(stateDir, "image-store")
	}
	if !filepath.IsAbs(s.dir) {
		return s, fmt.Errorf("--image-store-dir: want an absolute directory, not %q", s.dir)
	}
	for _, q := range []struct {
		flag, value string
		to          *int64
	}{{"--image-store-bytes", f.bytes, &s.bytes}, {"--image-layer-bytes", f.layerBytes, &s.layerBytes}} {
		v, err := resource.ParseQuantity(q.value)
		if err != nil || v.Sign() <= 0 {
			return s, fmt.Errorf("%s: want a positive quantity such as 20Gi, not %q", q.flag, q.value)
		}
		*q.to = v.Value()
	}
	if f.checkTTL <= 0 {
		return s, fmt.Errorf("--image-check-ttl: want a positive duration, not %s", f.checkTTL)
	}
	return s, nil
}
