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

package deploy_test

import (
	"bufio"
	"bytes"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// Docker can't run here, so this test does what `docker build` would: it
// reads the Dockerfile, copies into a build context what its COPY lines take
// (through .dockerignore), runs its `go build` RUN line there, and checks the
// binary is the static, stripped one distroless/static needs, and that it
// accepts the Deployment's arguments.
func TestDockerfileBuild(t *testing.T) {
	root := framework.RepoRoot()
	df := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	ignore := parseDockerignore(t, filepath.Join(root, ".dockerignore"))
	builder, final := df.stage(t, "builder"), df.stages[len(df.stages)-1]

	// The final image: distroless, non-root, the binary as entrypoint.
	if got := fromImage(final.from); got != "gcr.io/distroless/static:nonroot" {
		t.Errorf("final image FROM %s, want gcr.io/distroless/static:nonroot", got)
	}
	if got := fromImage(builder.from); got != "golang:1.26" {
		t.Errorf("builder FROM %s, want golang:1.26", got)
	}
	if got := final.last(t, "USER"); got != "65532:65532" {
		t.Errorf("USER %s, want 65532:65532 (the Deployment's runAsUser)", got)
	}
	if got := final.last(t, "ENTRYPOINT"); got != `["/book-controller"]` {
		t.Errorf(`ENTRYPOINT %s, want ["/book-controller"]`, got)
	}
	copyFrom := final.all("COPY")
	if len(copyFrom) != 1 || copyFrom[0] != "--from=builder /book-controller /book-controller" {
		t.Fatalf("final stage COPY %q, want only --from=builder /book-controller /book-controller", copyFrom)
	}

	// The build step.
	var build string
	for _, run := range builder.all("RUN") {
		if strings.Contains(run, "go build") {
			if build != "" {
				t.Fatalf("two RUN lines run go build:\n%s\n%s", build, run)
			}
			build = stripRunFlags(run)
		}
	}
	if build == "" {
		t.Fatal("no RUN line in the builder stage runs go build")
	}
	for _, want := range []string{"CGO_ENABLED=0 ", "go build ", " -tags grpcnotrace ", " -trimpath ", " -gcflags=all=-dwarf=false ", ` -ldflags="-s -w -X main.gitVersion=${VERSION} -X main.gitCommit=${COMMIT}" `, " -o /book-controller ", " ./cmd/controller"} {
		if !strings.Contains(build+" ", want) {
			t.Errorf("build step %q lacks %q", build, want)
		}
	}

	// The build context, as docker build would see it, with what the
	// builder stage copies into its WORKDIR.
	tmp := t.TempDir()
	workdir := builder.last(t, "WORKDIR")
	ctxDir := filepath.Join(tmp, "fs", filepath.FromSlash(workdir))
	for _, cp := range builder.all("COPY") {
		copyIntoStage(t, root, ignore, ctxDir, cp)
	}
	out := filepath.Join(tmp, "fs", "book-controller")
	cmd := exec.Command("sh", "-c", strings.Replace(build, " -o /book-controller ", " -o "+out+" ", 1))
	cmd.Dir = ctxDir
	// ARGs docker sets for the target platform, and those make docker-build
	// passes (hack/version.sh); GOWORK=off so that no go.work above the
	// context leaks in.
	const version, commit = "v0.0.0-dockerfiletest", "0123456789abcdef0123456789abcdef01234567"
	cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH, "GOWORK=off", "VERSION="+version, "COMMIT="+commit)
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build step failed in the build context: %v\n%s\n%s", err, build, output)
	}

	t.Run("binary is static and stripped", func(t *testing.T) {
		checkStaticELF(t, out)
	})
	t.Run("binary leaves out golang.org/x/net/trace", func(t *testing.T) {
		checkNoNetTrace(t, out)
	})
	t.Run("binary carries the VERSION and COMMIT build arguments", func(t *testing.T) {
		output, code := framework.RunToExit(t, time.Minute, "/book-controller", out, "--version")
		if want := "book-controller " + version + " (commit " + commit + ", built with go"; code != 0 || !strings.HasPrefix(output, want) {
			t.Errorf("/book-controller --version: exit code %d, %q; want 0 and %q…", code, output, want)
		}
	})
	t.Run("binary accepts the Deployment's arguments", func(t *testing.T) {
		for _, dir := range []string{baseDir, namespacedDir} {
			var d appsv1.Deployment
			toTyped(t, find(t, env.RenderManifests(t, dir), "Deployment", controllerNamespace, controllerName), &d)
			args := d.Spec.Template.Spec.Containers[0].Args
			// --help last: every flag before it must parse, then usage, exit 0.
			output, code := framework.RunToExit(t, time.Minute, "/book-controller", out, append(slices.Clone(args), "--help")...)
			if code != 0 {
				t.Errorf("%s: /book-controller %s --help: exit code %d\n%s", dir, strings.Join(args, " "), code, output)
			}
		}
	})
}

// TestDockerignore: the context holds the sources and nothing heavy or
// secret. (TestDockerfileBuild shows the sources are enough.)
func TestDockerignore(t *testing.T) {
	ignore := parseDockerignore(t, filepath.Join(framework.RepoRoot(), ".dockerignore"))
	for _, p := range []string{".git/HEAD", ".git/objects/ab/cdef", "_output/tools/k8s/bin/kube-apiserver",
		"_output/local-cluster/kubeconfig", "hack/build-tools.sh", "test/integration/deploy/main_test.go",
		"manifests/crd.yaml", "Dockerfile", ".ci/run", "README.md", ".env"} {
		if !ignore.excluded(p) {
			t.Errorf("%s is in the build context", p)
		}
	}
	for _, p := range []string{"go.mod", "go.sum", "cmd/controller/main.go", "pkg/manager/manager.go",
		"pkg/generated/clientset/versioned/clientset.go"} {
		if ignore.excluded(p) {
			t.Errorf("%s is not in the build context", p)
		}
	}
}

func checkStaticELF(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s is not an ELF binary: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			data, _ := io.ReadAll(p.Open())
			t.Errorf("has a PT_INTERP header (%s): dynamically linked, won't run on distroless/static", bytes.TrimRight(data, "\x00"))
		}
		if p.Type == elf.PT_DYNAMIC {
			t.Errorf("has a PT_DYNAMIC header: dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		t.Errorf("needs shared libraries %q", libs)
	}
	// -ldflags "-s -w": no symbol table, no DWARF.
	for _, s := range f.Sections {
		if s.Name == ".symtab" || strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_") {
			t.Errorf("has section %s: not stripped (-ldflags \"-s -w\")", s.Name)
		}
	}
}

// checkNoNetTrace: the function names the runtime keeps (in .gopclntab,
// which -s does not strip) name no golang.org/x/net/trace function. That
// package's init runs HTML templates, whose reflective method calls make the
// linker keep every exported method of every type: the binary doubles.
// `-tags grpcnotrace` keeps gRPC from importing it.
func checkNoNetTrace(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("golang.org/x/net/trace.")) {
		t.Errorf("%s links golang.org/x/net/trace (%d bytes): build with -tags grpcnotrace", path, len(data))
	}
}

// dockerfile is the instructions of a Dockerfile, by stage.
type dockerfile struct{ stages []*stage }

type stage struct {
	name, from string
	insts      []instruction
}

type instruction struct{ cmd, args string }

func (d *dockerfile) stage(t *testing.T, name string) *stage {
	t.Helper()
	for _, s := range d.stages {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("Dockerfile has no stage %q", name)
	return nil
}

func (s *stage) all(cmd string) []string {
	var out []string
	for _, i := range s.insts {
		if i.cmd == cmd {
			out = append(out, i.args)
		}
	}
	return out
}

func (s *stage) last(t *testing.T, cmd string) string {
	t.Helper()
	all := s.all(cmd)
	if len(all) == 0 {
		t.Fatalf("stage %q has no %s", s.name, cmd)
	}
	return all[len(all)-1]
}

// parseDockerfile joins continuation lines, drops comments and splits the
// instructions into stages. Enough for this Dockerfile; no heredocs.
func parseDockerfile(t *testing.T, path string) *dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(strings.TrimSpace(cont) + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends in a continuation line", path)
	}
	d := &dockerfile{}
	for _, l := range lines {
		cmd, args, _ := strings.Cut(l, " ")
		cmd, args = strings.ToUpper(cmd), strings.TrimSpace(args)
		if cmd == "FROM" {
			s := &stage{from: args}
			if i := strings.Index(strings.ToLower(args), " as "); i >= 0 {
				s.from, s.name = args[:i], strings.TrimSpace(args[i+4:])
			}
			d.stages = append(d.stages, s)
			continue
		}
		if len(d.stages) == 0 {
			if cmd == "ARG" {
				continue
			}
			t.Fatalf("%s: %s before the first FROM", path, cmd)
		}
		s := d.stages[len(d.stages)-1]
		s.insts = append(s.insts, instruction{cmd, args})
	}
	return d
}

// fromImage is a FROM's image without flags such as --platform.
func fromImage(from string) string {
	fields := strings.Fields(from)
	for len(fields) > 1 && strings.HasPrefix(fields[0], "--") {
		fields = fields[1:]
	}
	return strings.Join(fields, " ")
}

// stripRunFlags drops RUN's own flags (--mount, --network, --security).
func stripRunFlags(run string) string {
	for strings.HasPrefix(run, "--") {
		_, rest, _ := strings.Cut(run, " ")
		run = strings.TrimSpace(rest)
	}
	return run
}

// copyIntoStage does a context COPY: "COPY src... dest", where a directory
// source copies its contents and dest ending in / is a directory.
func copyIntoStage(t *testing.T, root string, ignore *dockerignore, workdir, args string) {
	t.Helper()
	fields := strings.Fields(args)
	if len(fields) < 2 || strings.HasPrefix(fields[0], "--") {
		t.Fatalf("COPY %s: want plain sources and a destination", args)
	}
	srcs, dest := fields[:len(fields)-1], fields[len(fields)-1]
	if strings.HasPrefix(dest, "/") {
		t.Fatalf("COPY %s: absolute destination; expected one relative to WORKDIR", args)
	}
	destDir := filepath.Join(workdir, filepath.FromSlash(dest))
	for _, src := range srcs {
		src = path.Clean(src)
		info, err := os.Stat(filepath.Join(root, src))
		if err != nil {
			t.Fatalf("COPY %s: %v", args, err)
		}
		if !info.IsDir() {
			if !strings.HasSuffix(dest, "/") && len(srcs) > 1 {
				t.Fatalf("COPY %s: several sources need a destination ending in /", args)
			}
			if ignore.excluded(src) {
				t.Fatalf("COPY %s: %s is excluded by .dockerignore, so docker build would fail", args, src)
			}
			target := destDir
			if strings.HasSuffix(dest, "/") || dest == "." {
				target = filepath.Join(destDir, path.Base(src))
			}
			copyFile(t, filepath.Join(root, src), target)
			continue
		}
		n := 0
		err = filepath.WalkDir(filepath.Join(root, src), func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			if ignore.excluded(filepath.ToSlash(rel)) {
				return nil
			}
			inner, _ := filepath.Rel(filepath.Join(root, src), p)
			copyFile(t, p, filepath.Join(destDir, inner))
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("COPY %s: .dockerignore leaves nothing of %s", args, src)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dockerignore applies .dockerignore patterns as docker does: a path is
// excluded when the last pattern matching it or one of its parent
// directories is not an exception (!). Patterns with ** are not supported
// here; the test fails on one rather than guess.
type dockerignore struct {
	patterns []ignorePattern
}

type ignorePattern struct {
	glob      string
	exception bool
}

func parseDockerignore(t *testing.T, file string) *dockerignore {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := &dockerignore{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := ignorePattern{}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			p.exception, line = true, strings.TrimSpace(rest)
		}
		if strings.Contains(line, "**") {
			t.Fatalf(".dockerignore pattern %q: ** is not supported by this test", line)
		}
		p.glob = path.Clean(strings.TrimPrefix(line, "/"))
		if _, err := path.Match(p.glob, ""); err != nil {
			t.Fatalf(".dockerignore pattern %q: %v", line, err)
		}
		d.patterns = append(d.patterns, p)
	}
	return d
}

func (d *dockerignore) excluded(p string) bool {
	excluded := false
	for _, pat := range d.patterns {
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if ok, _ := path.Match(pat.glob, q); ok {
				excluded = !pat.exception
				break
			}
		}
	}
	return excluded
}
