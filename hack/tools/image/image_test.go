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
	"debug/elf"
	"errors"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testMeta are labels no real build has, so a test passing on them can't
// be reading some other image.
var testMeta = Metadata{
	Source:   "https://example.invalid/book-controller",
	Version:  "v0.0.0-imagetest",
	Revision: "0123456789abcdef0123456789abcdef01234567",
	Created:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
}

const testTag = "book-controller:imagetest"

// repoRoot is the product module, three directories up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "controller", "main.go")); err != nil {
		t.Fatalf("%s is not the repository root: %v", root, err)
	}
	return root
}

func build(t *testing.T, meta Metadata, platforms ...v1.Platform) *Result {
	t.Helper()
	if len(platforms) == 0 {
		platforms = DefaultPlatforms
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := Build(ctx, BuildOptions{
		RepoRoot:  repoRoot(t),
		OutDir:    t.TempDir(),
		Tag:       testTag,
		Platforms: platforms,
		Meta:      meta,
		Log:       testLog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestImage builds the image, pushes it to a registry running in this
// process, pulls it back by digest and checks what a container runtime
// would get: both platforms, the config, one file, a binary that runs.
func TestImage(t *testing.T) {
	ctx := context.Background()
	res := build(t, testMeta)

	// What was written to disk is what was built.
	fromLayout, err := ReadLayout(res.LayoutDir)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := fromLayout.Digest(); d != res.Digest {
		t.Fatalf("OCI layout holds %s, Build returned %s", d, res.Digest)
	}

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	// As `make image-push IMG=...` does it.
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"push", "-layout", res.LayoutDir, host + "/book-controller:v0.0.0-imagetest"}, &stdout, &stderr); err != nil {
		t.Fatalf("image push: %v\n%s", err, stderr.String())
	}
	if want := "pushed " + host + "/book-controller@" + res.Digest.String(); !strings.Contains(stdout.String(), want) {
		t.Fatalf("image push printed %q, want %q", stdout.String(), want)
	}
	ref, err := name.NewDigest(host + "/book-controller@" + res.Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	if d, _ := idx.Digest(); d != res.Digest {
		t.Fatalf("the registry serves %s under %s", d, res.Digest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	if !maps.Equal(im.Annotations, testMeta.Labels()) {
		t.Errorf("index annotations %v, want %v", im.Annotations, testMeta.Labels())
	}
	var platforms []string
	for _, desc := range im.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		platforms = append(platforms, desc.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("index platforms %q, want %q", platforms, want)
	}

	indexSize, _ := idx.Size()
	t.Logf("image index %s (%d bytes)", res.Digest, indexSize)
	for _, desc := range im.Manifests {
		p := *desc.Platform
		t.Run(p.String(), func(t *testing.T) {
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			bin := checkImage(t, img, p)
			checkELF(t, bin, p)
			if p.Architecture == runtime.GOARCH {
				runHelp(t, bin, testMeta)
			}
			checkTarball(t, res.Tarballs[p.String()], img)

			layers, _ := img.Layers()
			compressed, _ := layers[0].Size()
			manifestSize, _ := img.Size()
			t.Logf("%s image %s: layer %d bytes compressed, binary %d bytes, manifest %d bytes",
				p.String(), desc.Digest, compressed, len(bin), manifestSize)
		})
	}
}

// TestImageReproducible: building the same sources with the same metadata
// gives the same digest, byte for byte the same layout and tarballs; a
// different timestamp gives another digest (so the timestamp is really in
// the image, and fixed rather than taken from the clock).
func TestImageReproducible(t *testing.T) {
	first := build(t, testMeta)
	second := build(t, testMeta)
	if first.Digest != second.Digest {
		t.Fatalf("two builds of the same sources: %s and %s", first.Digest, second.Digest)
	}
	for _, p := range DefaultPlatforms {
		a, b := readFile(t, first.Tarballs[p.String()]), readFile(t, second.Tarballs[p.String()])
		if !bytes.Equal(a, b) {
			t.Errorf("the %s docker tarballs of two builds differ", p.String())
		}
	}
	if a, b := readFile(t, filepath.Join(first.LayoutDir, "index.json")), readFile(t, filepath.Join(second.LayoutDir, "index.json")); !bytes.Equal(a, b) {
		t.Errorf("index.json of two builds differ:\n%s\n%s", a, b)
	}
	t.Logf("two builds: %s", first.Digest)

	// One platform is enough to see the timestamp move the digest.
	amd64 := DefaultPlatforms[0]
	once := build(t, testMeta, amd64)
	later := testMeta
	later.Created = later.Created.Add(time.Second)
	if again := build(t, later, amd64); again.Digest == once.Digest {
		t.Errorf("a build one second later in -created has the same digest %s: the timestamp is not in the image", again.Digest)
	}
}

// checkImage checks one platform's config and filesystem and returns the
// binary, the only file.
func checkImage(t *testing.T, img v1.Image, p v1.Platform) []byte {
	t.Helper()
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		t.Errorf("config platform %s/%s, index says %s", cf.OS, cf.Architecture, p.String())
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (the Deployment's runAsUser/runAsGroup)", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/book-controller"}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/book-controller] and no cmd", c.Entrypoint, c.Cmd)
	}
	if c.WorkingDir != "/" {
		t.Errorf("workdir %q, want /", c.WorkingDir)
	}
	if len(c.Env) != 0 {
		t.Errorf("env %q, want none", c.Env)
	}
	if !maps.Equal(c.Labels, testMeta.Labels()) {
		t.Errorf("labels %v, want %v", c.Labels, testMeta.Labels())
	}
	for _, k := range []string{LabelSource, LabelVersion, LabelRevision} {
		if c.Labels[k] == "" {
			t.Errorf("label %s missing", k)
		}
	}
	if !cf.Created.Time.Equal(testMeta.Created) {
		t.Errorf("created %s, want %s", cf.Created.Time, testMeta.Created)
	}
	for _, h := range cf.History {
		if !h.Created.Time.Equal(testMeta.Created) {
			t.Errorf("history entry %q created %s, want %s", h.CreatedBy, h.Created.Time, testMeta.Created)
		}
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1 (no base image, the binary alone)", len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	var bin []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		if h.Name != "book-controller" {
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("book-controller: type %c mode %o owner %d:%d, want a regular file, 0755, root-owned (not writable by 65532)",
				h.Typeflag, h.Mode, h.Uid, h.Gid)
		}
		if !h.ModTime.Equal(testMeta.Created) {
			t.Errorf("book-controller mtime %s, want %s", h.ModTime, testMeta.Created)
		}
		if bin, err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(files, []string{"book-controller"}) {
		t.Fatalf("files in the image %q, want only book-controller", files)
	}
	return bin
}

// checkELF: a static binary for the platform's CPU, which an empty base
// (no libc, no loader) can run.
func checkELF(t *testing.T, bin []byte, p v1.Platform) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("the binary is not ELF: %v", err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	if f.Machine != want {
		t.Errorf("ELF machine %s, want %s for %s", f.Machine, want, p.String())
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %s: dynamically linked; an empty base has no loader", prog.Type)
		}
	}
	// Built with BuildTags: no golang.org/x/net/trace function in the
	// names the runtime keeps (its templates would double the binary).
	if bytes.Contains(bin, []byte("golang.org/x/net/trace.")) {
		t.Errorf("the binary (%d bytes) links golang.org/x/net/trace: build with -tags %s", len(bin), BuildTags)
	}
}

// runHelp runs the binary taken from the layer, as the container would
// start it, with --help and with --version.
func runHelp(t *testing.T, bin []byte, meta Metadata) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "book-controller")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("book-controller --help from the image: %v\n%s", err, out)
	}
	for _, want := range []string{"Usage of book-controller", "--metrics-bind-address", "--leader-elect"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("book-controller --help lacks %q:\n%s", want, out)
		}
	}
	// The version labels are what the binary says it is.
	out, err = exec.Command(path, "--version").CombinedOutput()
	want := "book-controller " + meta.Version + " (commit " + meta.Revision + ", built with go"
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("book-controller --version from the image: %v, %q; want %q…", err, out, want)
	}
}

// checkTarball: the docker tarball holds this very image (same config, same
// layer) under the tag, as `docker load` would read it.
func checkTarball(t *testing.T, path string, img v1.Image) {
	t.Helper()
	if path == "" {
		t.Fatal("no docker tarball written")
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{testTag}) {
		t.Fatalf("%s manifest.json %+v, want one image tagged %s", path, m, testTag)
	}
	tag, _ := name.NewTag(testTag)
	fromTar, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	gotCfg, _ := fromTar.ConfigName()
	wantCfg, _ := img.ConfigName()
	if gotCfg != wantCfg {
		t.Errorf("%s: config %s, the index's image has %s", path, gotCfg, wantCfg)
	}
	gotLayers, _ := fromTar.Layers()
	wantLayers, _ := img.Layers()
	if len(gotLayers) != len(wantLayers) {
		t.Fatalf("%s: %d layers, want %d", path, len(gotLayers), len(wantLayers))
	}
	for i := range gotLayers {
		g, _ := gotLayers[i].DiffID()
		w, _ := wantLayers[i].DiffID()
		if g != w {
			t.Errorf("%s layer %d: %s, want %s", path, i, g, w)
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// testLog sends Build's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
