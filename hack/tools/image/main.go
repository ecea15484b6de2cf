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

// Command image builds and pushes the Book controller's container image
// without a Docker engine, with go-containerregistry:
//
//	go run . build -repo ../../.. -out ../../../_output/image -tag book-controller:latest \
//	    -source URL -version V -revision SHA [-created UNIX] [-platforms linux/amd64,linux/arm64]
//	go run . push -layout ../../../_output/image/oci registry.example.com/book-controller:v0.1.0
//
// `make image` and `make image-push IMG=...` run these. build compiles the
// static binary for each platform, puts each alone in an image on an empty
// base (user 65532:65532, entrypoint the binary, workdir /, OCI labels),
// joins them in one image index and writes it as an OCI layout (oci/) and
// one docker-loadable tarball per platform. Every timestamp is -created
// (default $SOURCE_DATE_EPOCH, else 0), so the same commit gives the same
// digest. push uploads the layout's index to a registry.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "image: error: %v\n", err)
		os.Exit(1)
	}
}

const usage = "usage: image build [flags] | image push -layout DIR IMAGE (run `image build -h` for the flags)"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "build":
		return runBuild(ctx, args[1:], stdout, stderr)
	case "push":
		return runPush(ctx, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q; %s", args[0], usage)
	}
}

func runBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := BuildOptions{Log: stderr}
	var platforms, created string
	fs.StringVar(&o.RepoRoot, "repo", ".", "the product module's directory (holds cmd/controller)")
	fs.StringVar(&o.OutDir, "out", "_output/image", "where to write oci/, the tarballs and bin/")
	fs.StringVar(&o.Tag, "tag", "book-controller:latest", "the image's name in the docker tarballs and the layout")
	fs.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	fs.StringVar(&o.Meta.Source, "source", "", "org.opencontainers.image.source: the repository URL")
	fs.StringVar(&o.Meta.Version, "version", "", "org.opencontainers.image.version, e.g. `git describe --tags --always --dirty`")
	fs.StringVar(&o.Meta.Revision, "revision", "", "org.opencontainers.image.revision: the commit")
	fs.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "the image's timestamp in Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: image build takes only flags", fs.Arg(0))
	}
	for flagName, v := range map[string]string{"-source": o.Meta.Source, "-version": o.Meta.Version, "-revision": o.Meta.Revision} {
		if v == "" {
			return fmt.Errorf("%s is required: the image's OCI labels name where it came from", flagName)
		}
	}
	var err error
	if o.Meta.Created, err = parseCreated(created); err != nil {
		return err
	}
	if o.Platforms, err = parsePlatforms(platforms); err != nil {
		return err
	}
	res, err := Build(ctx, o)
	if err != nil {
		return err
	}
	size, err := res.Index.Size()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image: %s %s (%s), index %d bytes\n", o.Tag, res.Digest, platforms, size)
	for _, p := range o.Platforms {
		fmt.Fprintf(stdout, "image: docker load -i %s   # %s only\n", res.Tarballs[p.String()], p.String())
	}
	return nil
}

func runPush(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("layout", "_output/image/oci", "the OCI layout `image build` wrote")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("image push takes one image reference, e.g. registry.example.com/book-controller:v0.1.0")
	}
	idx, err := ReadLayout(*dir)
	if err != nil {
		return err
	}
	d, err := Push(ctx, idx, fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image: pushed %s\n", d)
	return nil
}

func parseCreated(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("-created (or SOURCE_DATE_EPOCH) %q is not a Unix time in seconds, e.g. $(git log -1 --format=%%ct)", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := v1.ParsePlatform(strings.TrimSpace(f))
		if err != nil || p.OS != "linux" || p.Architecture == "" {
			return nil, fmt.Errorf("-platforms: %q is not a linux/ARCH platform, e.g. linux/amd64", f)
		}
		out = append(out, *p)
	}
	return out, nil
}
