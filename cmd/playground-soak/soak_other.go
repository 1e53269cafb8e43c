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
	"regexp"
	"runtime"
)

// run: the soak's node runs runc sandboxes and is searched through /proc,
// cgroups and nftables, all Linux.
func run(context.Context, options, io.Writer) (int, error) {
	return 0, fmt.Errorf("the soak needs Linux (runc, cgroups, /proc, nftables), not %s", runtime.GOOS)
}

func removeState(string) error {
	return fmt.Errorf("the soak needs Linux, not %s", runtime.GOOS)
}

func selectKinds(*regexp.Regexp) []string { return nil }
