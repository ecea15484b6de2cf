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
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func runRegistry(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node-helper registry", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:5000", "loopback address to serve the registry on")
	pauseBinary := fs.String("pause-binary", "", "static pause binary to serve as the pod sandbox image (required)")
	pauseRef := fs.String("pause-ref", "localhost:5000/pause:3.10", "name to serve the pause image under; its registry must be -addr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pauseBinary == "" {
		return errors.New("registry: -pause-binary is required (hack/build-tools.sh builds it as pause)")
	}
	if host, _, err := net.SplitHostPort(*addr); err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("registry: -addr %q must be a loopback host:port, e.g. 127.0.0.1:5000", *addr)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("registry: %w (is another registry or local node running? make cluster-down stops ours)", err)
	}
	srv := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	if err := pushPause(ctx, *pauseBinary, *pauseRef); err != nil {
		_ = srv.Close()
		return err
	}
	fmt.Printf("registry on %s, serving %s\n", *addr, *pauseRef)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	}
}

// pushPause builds an image whose only file is the pause binary and pushes
// it into the registry that was just started.
func pushPause(ctx context.Context, binary, ref string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("registry: reading the pause binary: %w", err)
	}
	layer, err := singleFileLayer("pause", bin)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	// The config that AppendLayers made holds the layer's diff ID; keep it.
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535", WorkingDir: "/"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("registry: -pause-ref: %w", err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("registry: pushing %s to itself: %w", ref, err)
	}
	return nil
}

func singleFileLayer(name string, content []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
}
