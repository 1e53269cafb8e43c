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
	"flag"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/playground-dev/playground/hostagent/guest"
	"github.com/playground-dev/playground/hostagent/guestapi"
)

func run(mode string, args []string) int {
	switch mode {
	case "init":
		fs := flag.NewFlagSet("init", flag.ExitOnError)
		spares := fs.Int("spares", 1, "idle shepherds kept ready for the next command")
		lazy := fs.Bool("lazy", os.Getenv(guestapi.LazyInitEnv) == "1", "keep no spare shepherd until the sandbox is first used (a pooled sandbox; default from "+guestapi.LazyInitEnv+")")
		vmPort := fs.String("vm-port", "", "in a vm sandbox, the virtio-serial port to serve the agent on")
		_ = fs.Parse(args)
		if err := guest.RunInit(guest.InitOptions{Spares: *spares, Lazy: *lazy, Log: os.Stderr, VMPort: *vmPort}); err != nil {
			fmt.Fprintf(os.Stderr, "playground-sandbox init: %v\n", err)
			return 1
		}
		return 0
	case "shepherd":
		return guest.RunShepherd()
	case guestapi.HoldMode:
		return guest.RunHold(args)
	case guestapi.ConfineMode:
		return guest.RunConfine(args)
	case guestapi.SyncMode:
		unix.Sync()
		return 0
	case "vminit":
		if err := guest.RunVMInit(); err != nil {
			fmt.Fprintf(os.Stderr, "playground-sandbox vminit: %v\n", err)
		}
		return 1
	}
	usage()
	return 2
}
