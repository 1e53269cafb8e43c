//go:build !linux

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

package devenv

import "github.com/playground-dev/playground/hostagent/nodeagent"

// openImages: the image store is Linux's only; elsewhere dev's node runs
// no image (a Sandbox that names one is refused, saying so).
func openImages(string, int64, []string) (nodeagent.ImageStore, error) { return nil, nil }
