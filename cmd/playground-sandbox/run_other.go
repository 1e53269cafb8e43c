//go:build !linux

package main

import (
	"fmt"
	"os"
	"runtime"
)

// run refuses: sandboxes of the oci backend are Linux containers.
func run(string, []string) int {
	fmt.Fprintf(os.Stderr, "playground-sandbox: not supported on %s\n", runtime.GOOS)
	return 1
}
