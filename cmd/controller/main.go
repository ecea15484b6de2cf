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

// Command controller runs the Book controller: it parses flags, builds the
// client configuration and hands over to pkg/manager. It holds no logic of
// its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/manager"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run returns the process exit code: 0 after a clean shutdown, 1 when
// anything went wrong, with a one-line reason on stderr.
func run(args []string) int {
	// A controller's memory is its cache, and it is idle most of the time:
	// collecting at 50% heap growth instead of Go's 100% lowered peak RSS by
	// 13% for 18% more CPU over 10000 Books. GOGC, when set, still wins.
	// The measurement: docs/benchmark.md. // fork:line bench
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(50)
	}
	o, err := parse(args, os.Stdout)
	if errors.Is(err, errHelp) || errors.Is(err, errVersion) {
		return 0
	}
	if err != nil {
		return fail(err)
	}
	cfg, err := restConfig(o)
	if err != nil {
		return fail(err)
	}

	ctx := klog.NewContext(signalContext(), klog.Background())
	mgr := o.mgr
	mgr.RESTConfig = cfg
	err = manager.Run(ctx, mgr)
	klog.Flush()
	if err != nil {
		return fail(err)
	}
	return 0
}

// signalContext is cancelled by the first SIGINT or SIGTERM, which starts a
// graceful shutdown; a second one exits at once.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		klog.Info("Received signal, shutting down gracefully; send another to exit immediately")
		cancel()
		<-ch
		klog.Flush()
		os.Exit(1)
	}()
	return ctx
}

func fail(err error) int {
	klog.Flush()
	fmt.Fprintf(os.Stderr, "book-controller: error: %v\n", err)
	return 1
}
