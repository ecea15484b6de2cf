// Command pause is the pod sandbox's only process on the local node: it
// holds the pod's namespaces open until the runtime stops it. The node
// cannot pull registry.k8s.io/pause (nothing leaves the machine), so
// node-helper registry serves an image of this static binary instead.
//
// It exits 0 on SIGTERM or SIGINT, and reaps children it inherits when it
// is the pid namespace's init (a pod with shareProcessNamespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every exited child; one SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
