// Command pause is the pod sandbox's process for hack/cluster.sh: it holds
// the pod's namespaces, reaps the children it inherits (as PID 1 of a pod
// that shares its process namespace) and exits on SIGINT or SIGTERM.
// No image registry is reachable here, so registry.k8s.io/pause is not
// either; this is its few lines in Go, built static.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
