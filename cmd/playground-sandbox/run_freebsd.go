//go:build freebsd && (amd64 || arm64)

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
	"github.com/playground-dev/playground/hostagent/guest"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

// run: in a jail the guest binary is the reaper that each command runs
// under and the holder of each job (hostagent/backend/jail); init and the
// shepherds are Linux's.
func run(mode string, args []string) int {
	switch mode {
	case guestapi.ReapMode:
		return guest.RunReaper(args)
	case guestapi.HoldMode:
		return guest.RunHold(args)
	}
	usage()
	return 2
}
