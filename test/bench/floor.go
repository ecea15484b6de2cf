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

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/localcluster"
)

// initialEventsEnd is the annotation of the bookmark that ends a streaming
// list's initial events, in the JSON and in the protobuf stream alike.
var initialEventsEnd = []byte("k8s.io/initial-events-end")

// apiServerGC asks the bench's API server for a garbage collection (its
// /debug/pprof/heap?gc=1), so that a restart does not pay for the garbage
// the phase before it left: the API server's heap holds every Book of the
// phase, and a collection that falls inside a restart of 100,000 Books
// doubled the server's CPU for the same streams (docs/benchmark.md). Every
// configuration's restart gets the same. It reports whether the server did
// it (a cluster given with -kubeconfig may forbid the path).
func (e *env) apiServerGC(ctx context.Context) bool {
	_, err := e.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx)
	if err != nil {
		logf("  asking the API server for a garbage collection: %v", err)
	}
	return err == nil
}

// settle readies the machine for a restart or a kill: the API server's
// garbage collected (apiServerGC), then the rest of the machine quiet
// (waitQuiet). It returns the cores other work kept busy, and whether the
// collection was done.
func (e *env) settle(ctx context.Context) (busy float64, collected bool) {
	collected = e.apiServerGC(ctx)
	busy, _ = waitQuiet(ctx, e.o.maxBusy)
	return round(busy, 2), collected
}

// Floor is how long the API server takes to stream the lists a controller
// starts with, Books and its ConfigMaps at once, as streaming lists with
// compression, to a client that only reads the bytes: the time below which
// no controller can be synced on that server at that moment.
type Floor struct {
	Seconds          float64 `json:"seconds"`
	BooksSeconds     float64 `json:"booksSeconds"`
	ConfigMapSeconds float64 `json:"configMapSeconds"`
	// APIServerCPUSeconds is the server's CPU over both streams (0 with
	// -kubeconfig).
	APIServerCPUSeconds float64 `json:"apiServerCPUSeconds,omitempty"`
}

// floor measures the Floor of namespace ns, on a connection of its own.
func (e *env) floor(ctx context.Context, ns string) (*Floor, error) {
	client, err := kubernetes.NewForConfig(watchConfig(e.cfg))
	if err != nil {
		return nil, err
	}
	cpu0 := e.apiServerCPU()
	start := time.Now()
	f := &Floor{}
	var g errgroup.Group
	g.Go(func() error {
		var err error
		f.BooksSeconds, err = streamList(ctx, client.CoreV1().RESTClient().Get().AbsPath("/apis/webapp.ydzs.io/v2/namespaces", ns, "books").
			SetHeader("Accept", "application/json"))
		return err
	})
	g.Go(func() error {
		var err error
		f.ConfigMapSeconds, err = streamList(ctx, client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces", ns, "configmaps").
			Param("labelSelector", controller.ManagedBySelector).SetHeader("Accept", "application/vnd.kubernetes.protobuf;stream=watch"))
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	f.Seconds = round(time.Since(start).Seconds(), 3)
	f.BooksSeconds, f.ConfigMapSeconds = round(f.BooksSeconds, 3), round(f.ConfigMapSeconds, 3)
	if cpu0 > 0 {
		f.APIServerCPUSeconds = round(e.apiServerCPU()-cpu0, 2)
	}
	return f, nil
}

// streamList opens req as a streaming list and reads it, discarding the
// bytes, up to the bookmark that ends its initial events: how long that
// took.
func streamList(ctx context.Context, req *rest.Request) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	body, err := req.Param("watch", "true").Param("sendInitialEvents", "true").Param("allowWatchBookmarks", "true").
		Param("resourceVersionMatch", "NotOlderThan").Stream(ctx)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	buf := make([]byte, 1<<20)
	carry := 0 // bytes kept from the last read, so that the marker may span two
	for {
		n, err := body.Read(buf[carry:])
		if bytes.Contains(buf[:carry+n], initialEventsEnd) {
			return time.Since(start).Seconds(), nil
		}
		if err == io.EOF {
			return 0, fmt.Errorf("the stream ended before its initial events did")
		}
		if err != nil {
			return 0, err
		}
		carry = copy(buf, buf[max(0, carry+n-len(initialEventsEnd)):carry+n])
	}
}

// apiServerCPU is the CPU seconds the local API server has used, 0 if there
// is none to read.
func (e *env) apiServerCPU() float64 {
	if e.cluster == nil {
		return 0
	}
	pid, ok := e.cluster.Pids()[localcluster.KubeAPIServer]
	if !ok {
		return 0
	}
	st, err := readProc(pid)
	if err != nil {
		return 0
	}
	return st.CPUSeconds
}
