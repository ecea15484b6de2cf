// Command node-helper runs the two servers the local node needs besides
// containerd and the kubelet (pkg/localcluster starts both with
// Options.Node):
//
//	node-helper registry -addr 127.0.0.1:5000 -pause-binary BIN [-pause-ref localhost:5000/pause:3.10]
//	node-helper apiproxy -listen 10.0.0.1:443 -to 127.0.0.1:PORT
//
// registry is go-containerregistry's registry (the one make test-image
// pushes to), in memory, on loopback: `make image-push
// IMG=localhost:5000/...` pushes to it and the node's containerd pulls from
// it. It first serves the pod sandbox image, built from BIN (hack/tools/node/pause),
// because the node cannot pull registry.k8s.io/pause.
//
// apiproxy forwards TCP connections from the kubernetes Service's address,
// which the node puts on its pod bridge, to the API server on loopback, so
// that a pod's in-cluster configuration (KUBERNETES_SERVICE_HOST) reaches
// it without kube-proxy.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(os.Stderr, "node-helper: %v\n", err)
		os.Exit(1)
	}
}

const usage = "usage: node-helper registry [flags] | node-helper apiproxy -listen ADDR -to ADDR (-h for the flags)"

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "registry":
		return runRegistry(ctx, args[1:])
	case "apiproxy":
		return runAPIProxy(ctx, args[1:])
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}
