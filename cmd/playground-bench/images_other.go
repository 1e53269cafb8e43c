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

package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
)

// imageCosts: P8 needs the node's image store and the oci backend,
// Linux-only.
func imageCosts(context.Context, options, int, io.Writer) ([]row, error) {
	return nil, fmt.Errorf("the image rows need Linux (the image store, runc), not %s", runtime.GOOS)
}
