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
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DefaultPlatforms are the platforms `make image` builds.
var DefaultPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// BuildOptions say what Build compiles and where it writes.
type BuildOptions struct {
	// RepoRoot is the product module's directory; ./cmd/controller is
	// built there.
	RepoRoot string
	// OutDir receives the OCI layout (oci/), one docker tarball per
	// platform and the binaries (bin/<os>_<arch>/).
	OutDir string
	// Tag names the image in the docker tarballs (what `docker load`
	// tags) and in the layout's index.json.
	Tag string
	// Platforms to build; each becomes one image of the index.
	Platforms []v1.Platform
	// Meta are the labels and the timestamp.
	Meta Metadata
	// Log receives one line per step; nil discards them.
	Log io.Writer
}

// Result is what Build wrote.
type Result struct {
	// Index is the multi-platform image.
	Index v1.ImageIndex
	// Digest is the index's digest: what `image@sha256:...` pins.
	Digest v1.Hash
	// LayoutDir is the OCI image layout holding Index.
	LayoutDir string
	// Tarballs maps "os/arch" to the docker tarball of that platform's
	// image (a docker tarball holds a single platform).
	Tarballs map[string]string
	// Binaries maps "os/arch" to the binary in that platform's image.
	Binaries map[string]string
}

// Build compiles the controller for every platform, assembles the images
// and the index, and writes them to OutDir, replacing what a previous build
// left there.
func Build(ctx context.Context, o BuildOptions) (*Result, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if len(o.Platforms) == 0 {
		return nil, errors.New("no platforms to build")
	}
	tag, err := name.NewTag(o.Tag)
	if err != nil {
		return nil, fmt.Errorf("-tag %q is not an image reference (%v): pass one such as book-controller:latest", o.Tag, err)
	}
	res := &Result{
		LayoutDir: filepath.Join(o.OutDir, "oci"),
		Tarballs:  map[string]string{},
		Binaries:  map[string]string{},
	}
	var images []PlatformImage
	for _, p := range o.Platforms {
		bin := filepath.Join(o.OutDir, "bin", p.OS+"_"+p.Architecture, filepath.Base(BinaryPath))
		fmt.Fprintf(o.Log, "image: building %s for %s\n", BinaryPath[1:], p.String())
		if err := compile(ctx, o.RepoRoot, p, o.Meta, bin); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		img, err := NewImage(data, p, o.Meta)
		if err != nil {
			return nil, fmt.Errorf("%s image: %w", p.String(), err)
		}
		images = append(images, PlatformImage{Platform: p, Image: img})
		res.Binaries[p.String()] = bin
	}
	res.Index = NewIndex(images, o.Meta)
	if res.Digest, err = res.Index.Digest(); err != nil {
		return nil, err
	}

	fmt.Fprintf(o.Log, "image: writing the OCI layout %s\n", res.LayoutDir)
	if err := writeLayout(res.LayoutDir, res.Index, tag); err != nil {
		return nil, fmt.Errorf("writing the OCI layout %s: %w", res.LayoutDir, err)
	}
	for _, pi := range images {
		p := pi.Platform
		path := filepath.Join(o.OutDir, TarballName(p))
		fmt.Fprintf(o.Log, "image: writing the docker tarball %s (%s only)\n", path, p.String())
		if err := tarball.WriteToFile(path, tag, pi.Image); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		res.Tarballs[p.String()] = path
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "digest"), []byte(res.Digest.String()+"\n"), 0o644); err != nil {
		return nil, err
	}
	return res, nil
}

// BuildTags are the Dockerfile's: grpcnotrace keeps golang.org/x/net/trace
// (and with its templates, every exported method) out of the binary.
const BuildTags = "grpcnotrace"

// compile runs the Dockerfile's build command for one platform: a static
// (CGO_ENABLED=0), stripped binary with no local paths in it (-trimpath),
// cross-compiled without emulation. No DWARF is generated (the linker would
// strip it), as in every other build of ours, so the amd64 build reuses
// their compiled packages. The image's version and revision labels are what
// the binary's --version prints (the Dockerfile's VERSION and COMMIT).
func compile(ctx context.Context, root string, p v1.Platform, meta Metadata, out string) error {
	ldflags := fmt.Sprintf("-s -w -X main.gitVersion=%s -X main.gitCommit=%s", meta.Version, meta.Revision)
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", BuildTags, "-trimpath", "-gcflags=all=-dwarf=false", "-ldflags="+ldflags, "-o", out, "./cmd/controller")
	cmd.Dir = root
	// GOWORK=off: no go.work above the checkout leaks into the build.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOWORK=off")
	if p.Variant != "" && p.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %v\n%s", p.String(), err, out)
	}
	return nil
}

// writeLayout writes idx as an OCI image layout: index.json lists the index
// under the tag's name, blobs/ holds every manifest, config and layer.
func writeLayout(dir string, idx v1.ImageIndex, tag name.Tag) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{RefNameAnnotation: tag.TagStr()}))
}

// TarballName is the file name of a platform's docker tarball, e.g.
// book-controller-linux-amd64.tar.
func TarballName(p v1.Platform) string {
	return fmt.Sprintf("%s-%s-%s.tar", filepath.Base(BinaryPath), p.OS, p.Architecture)
}
