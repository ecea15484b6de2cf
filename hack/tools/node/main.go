/*
Copyright The book-controller Authors.

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

// Command node-helper runs the two servers the local node needs besides
// containerd and the kubelet (pkg/localcluster starts both with
// Options.Node):
//
//	node-helper registry -addr 127.0.0.1:5000 -pause-binary BIN [-pause-ref localhost:5000/pause:3.10]
//	node-helper forward -netns /run/netns/lcnode -in LISTEN=TO... -out LISTEN=TO...
//
// registry is go-containerregistry's registry (the one make test-image
// pushes to), in memory, on loopback: `make image-push
// IMG=localhost:5000/...` pushes to it and the node's containerd pulls from
// it. It first serves the pod sandbox image, built from BIN (hack/tools/node/pause),
// because the node cannot pull registry.k8s.io/pause.
//
// forward joins the node's network namespace, where containerd, the
// kubelet and the pods live, to the host's loopback, with no veth between
// them: -in listens inside the namespace (the kubernetes Service's address
// on the pods' bridge, the API server's and the registry's loopback ports)
// and forwards to the host's 127.0.0.1; -out listens on the host's
// 127.0.0.1 (the kubelet's port, for the API server's logs, exec and
// port-forward) and forwards into the namespace. TCP only, TLS end to end.
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

const usage = "usage: node-helper registry [flags] | node-helper forward -netns FILE -in LISTEN=TO -out LISTEN=TO (-h for the flags)"

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "registry":
		return runRegistry(ctx, args[1:])
	case "forward":
		return runForward(ctx, args[1:])
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}
