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

// Command fork turns this project into someone's own controller: it writes
// a copy of the tracked files with the module path, API group, version and
// kind renamed, optional parts left out, the generated code and CRD
// regenerated, gofmt'ed, in a fresh git repository (docs/fork.md).
//
//	go run ./hack/fork --module example.com/widget-controller --group apps.example.com \
//	  --version v1alpha1 --kind Widget --out ../widget-controller [--minimal]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// options are the command line's.
type options struct {
	names
	out, source string
	minimal     bool
	keep        []string // optional parts --minimal keeps
}

// parse reads the command line; every error is a usage error (exit 2).
func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("fork", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mod := fs.String("module", "", "Go module path of the new project (example.com/widget-controller)")
	group := fs.String("group", "", "API group, a DNS-1123 subdomain with a dot (apps.example.com)")
	version := fs.String("version", "", "API version the controller serves and uses (v1, v1alpha1, v2beta3)")
	kind := fs.String("kind", "", "kind, UpperCamelCase (Widget)")
	plural := fs.String("plural", "", "the kind's plural, lower case (default: y after a consonant -> ies; s, x, z, ch, sh -> es; else +s)")
	short := fs.String("short-name", "", "kubectl short name (default: the kind's first letter and its last consonant)")
	out := fs.String("out", "", "directory to write the new project into; must not exist or be empty")
	source := fs.String("source", ".", "a directory of this project's git checkout")
	minimal := fs.Bool("minimal", false, "leave out the optional parts: twin, bench, ui, shards, watchdecode, node, chaos")
	keep := fs.String("keep", "", "with --minimal, optional parts to keep nevertheless, comma-separated (--keep ui,shards)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q: every input is a flag", fs.Arg(0))
	}
	n, err := newNames(*mod, *group, *version, *kind, *plural, *short)
	if err != nil {
		return options{}, err
	}
	if err := checkOut(*out); err != nil {
		return options{}, err
	}
	var kept []string
	if *keep != "" {
		for _, p := range strings.Split(*keep, ",") {
			if pt, ok := parts[p]; !ok || pt.always {
				return options{}, &usageError{"keep", fmt.Sprintf("%q is no optional part (%s)", p, optionalParts())}
			}
			kept = append(kept, p)
		}
	}
	return options{names: n, out: *out, source: *source, minimal: *minimal, keep: kept}, nil
}

// checkOut: --out is given and is no file, nor a directory with anything in it.
func checkOut(out string) error {
	if out == "" {
		return &usageError{"out", "is required: the directory to write the new project into"}
	}
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return &usageError{"out", fmt.Sprintf("%s must be a new or empty directory: %v", out, err)}
	case len(entries) > 0:
		return &usageError{"out", fmt.Sprintf("%s must be a new or empty directory: it holds %d entries", out, len(entries))}
	}
	return nil
}

func run(args []string, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fork:", err)
		return 2
	}
	start := time.Now()
	files, err := render(o)
	if err != nil {
		fmt.Fprintln(stderr, "fork:", err)
		return 1
	}
	if err := write(o.out, files); err != nil {
		fmt.Fprintln(stderr, "fork:", err)
		return 1
	}
	// FORK_SKIP_FINISH=1 writes the files alone, for checking markers
	// quickly (go test ./hack/docs in the output); the result is no project.
	if os.Getenv("FORK_SKIP_FINISH") == "1" {
		return 0
	}
	if err := finish(o); err != nil {
		fmt.Fprintln(stderr, "fork:", err)
		return 1
	}
	mode := "whole"
	if o.minimal {
		mode = "minimal"
	}
	fmt.Fprintf(stderr, "fork: %s %s (%s/%s %s, %s) written to %s: %d files in %s\n",
		mode, o.Module, o.Group, o.Version, o.Kind, o.Plural, o.out, len(files), time.Since(start).Round(time.Second))
	return 0
}

// file is one file of the new project.
type file struct {
	path string // slash-separated, relative to the root
	mode os.FileMode
	data []byte
}

// render reads the tracked files of the source and returns the new
// project's: parts left out, markers cut, names renamed. Nothing is written.
func render(o options) ([]file, error) {
	root, err := gitOutput(o.source, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	root = strings.TrimSpace(root)
	list, err := gitOutput(root, "ls-files", "-z")
	if err != nil {
		return nil, err
	}
	drop := dropper(o.minimal, o.keep)
	moved := moves(drop)
	r := newRenamer(o.names)
	var files []file
	for _, p := range strings.Split(strings.TrimRight(list, "\x00"), "\x00") {
		if p == "" || dropped(p, drop) {
			continue
		}
		info, err := os.Lstat(filepath.Join(root, p))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(data[:min(len(data), 8000)], []byte{0}) {
			text, err := cutMarkers(string(data), drop)
			if err != nil {
				return nil, fmt.Errorf("%s:%w", p, err)
			}
			text = edit(p, text, o.names)
			for _, m := range moved {
				text = strings.ReplaceAll(text, m[0], m[1])
			}
			data = []byte(r.rename(text))
		}
		for _, m := range moved {
			if strings.HasPrefix(p, m[0]) {
				p = m[1] + strings.TrimPrefix(p, m[0])
				break
			}
		}
		files = append(files, file{path: r.rename(p), mode: info.Mode().Perm(), data: data})
	}
	return files, nil
}

// edit makes the few changes renaming cannot: the served version where
// the API package names it, and a fresh changelog.
func edit(p, text string, n names) string {
	if path.Base(path.Dir(p)) == "v2" && strings.Contains(p, "/webapp/v2/") {
		text = packageV2.ReplaceAllString(text, "package "+n.Version+"$1")
	}
	switch {
	case p == "pkg/apis/webapp/v2/register.go":
		return strings.Replace(text, `Version: "v2"`, fmt.Sprintf("Version: %q", n.Version), 1)
	case p == "CHANGELOG.md":
		return changelog
	}
	return text
}

var packageV2 = regexp.MustCompile(`(?m)^package v2(_test)?$`)

// changelog starts the new project's: hack/version.sh takes the newest
// release from it until the first v* tag.
const changelog = `# Changelog

What changed for the people who run book-controller: its flags and their
defaults, the Book API and its status, metrics and alerts, the manifests, and
the make targets. The format follows [Keep a Changelog](https://keepachangelog.com/en/1.1.0/);
versions follow [Semantic Versioning](https://semver.org/).

## [Unreleased]

## [v0.0.0]

The project as written by its generator, before any change of its own.
`

func write(out string, files []file) error {
	for _, f := range files {
		dst := filepath.Join(out, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

// finish regenerates what the generators own (code, CRD, flag tables),
// gofmt's, and commits the new project in a git repository of its own, so
// that hack/version.sh has a commit to name.
func finish(o options) error {
	steps := [][]string{
		{"git", "init", "--quiet"},
		{"hack/update-codegen.sh"},
		{"gofmt", "-w", "."},
		// The flag tables of docs/flags.md, which lose the flags of the
		// parts left out.
		{"hack/update-docs.sh"},
		{"git", "add", "--all"},
		{"git", "-c", "user.name=hack/fork", "-c", "user.email=fork@invalid", "commit", "--quiet", "--no-verify",
			"--message", fmt.Sprintf("%s: %s/%s %s, written by hack/fork", o.Module, o.Group, o.Version, o.Kind)},
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = o.out
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("in %s: %s: %v\n%s", o.out, strings.Join(s, " "), err, out)
		}
	}
	return nil
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return string(out), nil
}
