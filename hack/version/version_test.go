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

// Package version_test checks hack/version.sh, the one place the version
// every build stamps into the binary comes from, in throw-away git
// repositories: with and without a tag, clean and dirty, and outside git.
package version_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const changelog = `# Changelog

## [Unreleased]

- Something new.

## [v0.9.0] - 2026-12-04

- The last v1-only release.

## [v0.8.0] - 2026-12-02
`

// repo is a copy of hack/version.sh in a directory of its own, with a
// CHANGELOG.md, optionally under git with one commit.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T, withGit bool) *repo {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.write("hack/version.sh", string(script))
	if err := os.Chmod(filepath.Join(r.dir, "hack", "version.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.write("CHANGELOG.md", changelog)
	if withGit {
		r.git("init", "-q")
		r.git("add", ".")
		r.git("commit", "-q", "-m", "first")
	}
	return r
}

func (r *repo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// git runs git in the repository, isolated from the machine's and the
// user's configuration.
func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "tag.gpgSign=false", "-c", "commit.gpgSign=false"}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// version runs hack/version.sh with args from another directory, as the
// Makefile and the tests do, and returns its output and exit code.
func (r *repo) version(args ...string) (string, int) {
	r.t.Helper()
	cmd := exec.Command(filepath.Join(r.dir, "hack", "version.sh"), args...)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			r.t.Fatalf("hack/version.sh %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return strings.TrimSpace(string(out)), code
}

func (r *repo) mustVersion(args ...string) string {
	r.t.Helper()
	out, code := r.version(args...)
	if code != 0 {
		r.t.Fatalf("hack/version.sh %v: exit %d: %s", args, code, out)
	}
	return out
}

func TestWithoutTagTheChangelogsReleaseAndTheCommit(t *testing.T) {
	r := newRepo(t, true)
	short := r.git("rev-parse", "--short=7", "HEAD")
	if got, want := r.mustVersion(), "v0.9.0+git."+short; got != want {
		t.Errorf("version = %q, want %q (the newest release in CHANGELOG.md, not Unreleased or an older one)", got, want)
	}
	if got, want := r.mustVersion("--commit"), r.git("rev-parse", "HEAD"); got != want {
		t.Errorf("--commit = %q, want %q", got, want)
	}
	// An untracked file leaves the build clean, as for git describe --dirty.
	r.write("scratch.txt", "notes")
	if got, want := r.mustVersion(), "v0.9.0+git."+short; got != want {
		t.Errorf("with an untracked file: version = %q, want %q", got, want)
	}
	r.write("CHANGELOG.md", changelog+"\nedited\n")
	if got, want := r.mustVersion(), "v0.9.0+git."+short+".dirty"; got != want {
		t.Errorf("with a tracked file edited: version = %q, want %q", got, want)
	}
	if got, want := r.mustVersion("--ldflags"), "-X main.gitVersion=v0.9.0+git."+short+".dirty -X main.gitCommit="+r.git("rev-parse", "HEAD"); got != want {
		t.Errorf("--ldflags = %q, want %q", got, want)
	}
}

func TestWithTagGitDescribe(t *testing.T) {
	r := newRepo(t, true)
	r.git("tag", "v0.9.0")
	r.git("tag", "not-a-version") // --match 'v*' leaves it out
	if got, want := r.mustVersion(), "v0.9.0"; got != want {
		t.Errorf("on the tag: version = %q, want %q", got, want)
	}
	r.write("CHANGELOG.md", changelog+"\nedited\n")
	if got, want := r.mustVersion(), "v0.9.0-dirty"; got != want {
		t.Errorf("on the tag, edited: version = %q, want %q", got, want)
	}
	r.git("commit", "-q", "-am", "second")
	got := r.mustVersion()
	if want := regexp.MustCompile(`^v0\.9\.0-1-g[0-9a-f]{7,}$`); !want.MatchString(got) {
		t.Errorf("one commit after the tag: version = %q, want %s", got, want)
	}
	if !strings.HasSuffix(got, r.git("rev-parse", "--short=7", "HEAD")) {
		t.Errorf("one commit after the tag: version = %q does not end in the commit %s", got, r.git("rev-parse", "--short=7", "HEAD"))
	}
}

func TestOutsideGit(t *testing.T) {
	r := newRepo(t, false)
	if got, want := r.mustVersion(), "v0.9.0+unknown"; got != want {
		t.Errorf("version = %q, want %q", got, want)
	}
	if got, want := r.mustVersion("--commit"), "unknown"; got != want {
		t.Errorf("--commit = %q, want %q", got, want)
	}
}

func TestNoReleaseInTheChangelog(t *testing.T) {
	r := newRepo(t, true)
	r.write("CHANGELOG.md", "# Changelog\n\n## [Unreleased]\n")
	out, code := r.version()
	if code == 0 || !strings.Contains(out, "no release heading") {
		t.Errorf("exit %d, output %q; want a failure naming the missing release heading", code, out)
	}
	if out, code := r.version("--bogus"); code != 2 || !strings.Contains(out, "usage: hack/version.sh") {
		t.Errorf("--bogus: exit %d, output %q; want 2 and the usage", code, out)
	}
}
