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

package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Finding is one statement that is not true: where, and what to fix.
type Finding struct {
	// Pos is file:line, the file relative to the repository root.
	Pos string
	Msg string
}

func (f Finding) String() string { return f.Pos + ": " + f.Msg }

func at(file string, line int) string { return fmt.Sprintf("%s:%d", file, line) }

// Docs holds the repository's Markdown, scanned.
type Docs struct {
	all []*mdDoc
}

// LoadDocs scans every Markdown file of the tree.
func LoadDocs(r *Repo) (*Docs, error) {
	d := &Docs{}
	for _, f := range r.markdownFiles() {
		doc, err := readMarkdown(r.Root, f)
		if err != nil {
			return nil, err
		}
		d.all = append(d.all, doc)
	}
	return d, nil
}

// prose is every doc that describes the project as it is: not the bench's
// reports, which are data a run wrote, nor CHANGELOG.md,
// which tells what earlier releases had; both are checked for links only.
func (d *Docs) prose() []*mdDoc {
	var out []*mdDoc
	for _, doc := range d.all {
		if !strings.HasPrefix(doc.path, "docs/bench/") && doc.path != "CHANGELOG.md" {
			out = append(out, doc)
		}
	}
	return out
}

func (d *Docs) byPath(p string) *mdDoc {
	for _, doc := range d.all {
		if doc.path == p {
			return doc
		}
	}
	return nil
}

// urlScheme matches links that leave the repository.
var urlScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:|^//`)

var lineAnchor = regexp.MustCompile(`^L(\d+)(-L(\d+))?$`)

// CheckLinks: every relative link of every Markdown file, and its #anchor,
// resolves.
func CheckLinks(r *Repo, d *Docs) []Finding {
	var out []Finding
	for _, doc := range d.all {
		for _, l := range doc.links {
			if msg := r.checkLink(d, doc, l.target); msg != "" {
				out = append(out, Finding{at(doc.path, l.line), msg})
			}
		}
	}
	return out
}

func (r *Repo) checkLink(d *Docs, doc *mdDoc, target string) string {
	if target == "" || urlScheme.MatchString(target) {
		return ""
	}
	file, frag, _ := strings.Cut(target, "#")
	rel := doc.path
	if file != "" {
		if strings.HasPrefix(file, "/") {
			rel = path.Clean(strings.TrimPrefix(file, "/"))
		} else {
			rel = path.Join(path.Dir(doc.path), file)
		}
		if strings.HasPrefix(rel, "../") || !r.exists(rel) {
			return fmt.Sprintf("the link %q leads to %s, which does not exist: fix the path (it is relative to %s)", target, rel, path.Dir(doc.path)+"/")
		}
	}
	if frag == "" {
		return ""
	}
	switch {
	case strings.HasSuffix(rel, ".md"):
		to := d.byPath(rel)
		if to == nil || !to.anchors[frag] {
			return fmt.Sprintf("the link %q names the anchor #%s, which no heading of %s makes: link a heading that exists (its text lowercased, punctuation dropped, spaces as hyphens)", target, frag, rel)
		}
	case lineAnchor.MatchString(frag):
		m := lineAnchor.FindStringSubmatch(frag)
		b, err := os.ReadFile(joinRoot(r.Root, rel))
		if err != nil {
			return err.Error()
		}
		n := strings.Count(string(b), "\n") + 1
		for _, s := range []string{m[1], m[3]} {
			if v, _ := strconv.Atoi(s); v > n {
				return fmt.Sprintf("the link %q names line %d, but %s has %d lines: fix the line", target, v, rel, n)
			}
		}
	default:
		return fmt.Sprintf("the link %q has an anchor into %s, which is not Markdown: drop the anchor or use #L<line>", target, rel)
	}
	return ""
}

// words splits a code span or a fenced line into the words a shell would.
func words(s string) []string {
	return strings.FieldsFunc(s, func(c rune) bool {
		return c == ' ' || c == '\t' || c == '"' || c == '\'' || c == '`' || c == ','
	})
}

// pathLike is a word that can be a path: no spaces, no placeholders.
var pathLike = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_./+-]*$`)

// checkedExt are the extensions of a bare file name that must name a file
// of the tree; other bare names (index.json, cluster.json) are often files
// a program writes.
var checkedExt = []string{".go", ".md", ".sh"}

// repoPath returns the path a word names in this repository, relative to
// the root, and whether it names one at all: a path that starts with one
// of the root's names (pkg/…, docs/…, ./hack/…), after "=", without a
// trailing ":line", "#anchor" or punctuation. Placeholders (<label>, *,
// {md,json}, …) name no path.
func (r *Repo) repoPath(word string) (string, bool) {
	if _, v, ok := strings.Cut(word, "="); ok {
		word = v
	}
	word = strings.TrimRight(strings.TrimLeft(word, "(["), ").;:,]")
	if strings.ContainsAny(word, "<>*{}$…|\\") || strings.Contains(word, "...") {
		return "", false
	}
	word, _, _ = strings.Cut(word, "#")
	if i := strings.IndexByte(word, ':'); i >= 0 {
		word = word[:i]
	}
	word = strings.TrimPrefix(word, "./")
	if i := strings.LastIndexByte(word, '/'); i >= 0 {
		// pkg/metrics.Registry: a name in the package at that path
		if j := strings.IndexByte(word[i:], '.'); j > 0 && i+j+1 < len(word) && word[i+j+1] >= 'A' && word[i+j+1] <= 'Z' {
			word = word[:i+j]
		}
	}
	if !pathLike.MatchString(word) || strings.HasPrefix(word, "../") {
		return "", false
	}
	first, _, _ := strings.Cut(word, "/")
	if !r.top[first] || (first == word && !strings.Contains(word, ".") && !r.exists(word)) {
		return "", false
	}
	return word, true
}

// bareFile returns a bare file name (no slash) with an extension the
// checks hold to the tree.
func bareFile(word string) (string, bool) {
	word = strings.TrimRight(strings.TrimLeft(word, "(["), ").;:,]")
	// "_test.go" names a kind of file, not a file.
	if strings.Contains(word, "/") || !pathLike.MatchString(word) || strings.HasPrefix(word, "_") {
		return "", false
	}
	for _, ext := range checkedExt {
		if strings.HasSuffix(word, ext) && len(word) > len(ext) {
			return word, true
		}
	}
	return "", false
}

// CheckPaths: every path of this repository a doc names in code, every
// bare file name of Go, Markdown or shell, and every data-path of the live
// view's HTML, exists. A span right after
// another project's possessive ("controller-runtime's `pkg/…`") is that
// project's.
func CheckPaths(r *Repo, d *Docs) []Finding {
	var out []Finding
	for _, doc := range d.prose() {
		dir, mod := path.Dir(doc.path), r.moduleOf(doc.path)
		check := func(line int, text string) {
			for _, w := range words(text) {
				if p, ok := r.repoPath(w); ok && !r.exists(p) && !r.exists(path.Join(dir, p)) && !r.exists(path.Join(mod, p)) {
					out = append(out, Finding{at(doc.path, line), fmt.Sprintf("names %s, which does not exist: fix the path, or write another project's path with its name first (controller-runtime/pkg/…)", p)})
				} else if f, ok := bareFile(w); ok && !r.bases[f] && !r.exists(path.Join(path.Dir(doc.path), f)) {
					out = append(out, Finding{at(doc.path, line), fmt.Sprintf("names the file %s, which is nowhere in the tree: fix the name, or give another project's file with its path (client-go/tools/cache/%s)", f, f)})
				}
			}
		}
		for _, s := range doc.spans {
			if !r.foreignOwner(s) {
				check(s.line, s.text)
			}
		}
		for _, l := range doc.fenced {
			check(l.line, l.text)
		}
	}
	return append(out, r.checkDataPaths()...)
}

// dataPath matches the live view's links to this repository's files
// (in its static HTML), which --ui-source-url turns into URLs.
var dataPath = regexp.MustCompile(`data-path="([^"]+)"`)

// checkDataPaths holds the data-path of every HTML file to the tree.
func (r *Repo) checkDataPaths() []Finding {
	var out []Finding
	for _, rel := range sortedKeys(r.files) {
		if !strings.HasSuffix(rel, ".html") || fixture(rel) {
			continue
		}
		b, err := os.ReadFile(joinRoot(r.Root, rel))
		if err != nil {
			return append(out, Finding{rel, err.Error()})
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range dataPath.FindAllStringSubmatch(line, -1) {
				if !r.exists(m[1]) {
					out = append(out, Finding{at(rel, i+1), fmt.Sprintf("links %s, which does not exist: fix the path", m[1])})
				}
			}
		}
	}
	return out
}

// makeCall matches "make" as a command, and what follows it up to the end
// of the command.
var makeCall = regexp.MustCompile(`(?:^|[\s;&|(])make\s+([^;&|#)\n]*)`)

var (
	targetLike = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	// quoted matches a quoted shell word, such as BENCH_FLAGS='-label ui'.
	quoted = regexp.MustCompile(`'[^']*'|"[^"]*"`)
)

// makeTargets returns the targets a command line gives make: the words
// after "make" that are neither variables (X=y) nor options, up to the
// first other word.
func makeTargets(text string) []string {
	var out []string
	text = quoted.ReplaceAllString(text, "''")
	for _, m := range makeCall.FindAllStringSubmatch(text, -1) {
		for _, w := range strings.Fields(m[1]) {
			if strings.Contains(w, "=") || strings.HasPrefix(w, "-") {
				continue
			}
			if !targetLike.MatchString(w) {
				break
			}
			out = append(out, w)
		}
	}
	return out
}

// CheckMakeTargets: every target a doc runs (make x) or lists (a table
// whose first column is headed "Target") is a rule of the Makefile; and
// where the docs hold such a table, every rule is in one.
func CheckMakeTargets(r *Repo, d *Docs) []Finding {
	var out []Finding
	listed, where := map[string]bool{}, ""
	for _, doc := range d.prose() {
		report := func(line int, t string) {
			if _, ok := r.Targets[t]; !ok {
				out = append(out, Finding{at(doc.path, line), fmt.Sprintf("names make target %q, which the Makefile does not have: fix the name, or add the target", t)})
			}
		}
		for _, s := range doc.spans {
			if s.column == 0 && s.header == "Target" {
				listed[s.text] = true
				where = doc.path
				report(s.line, s.text)
				continue
			}
			if r.foreignOwner(s) { // kubebuilder's `make manifests`
				continue
			}
			for _, t := range makeTargets(s.text) {
				report(s.line, t)
			}
		}
		for _, l := range doc.fenced {
			for _, t := range makeTargets(l.text) {
				report(l.line, t)
			}
		}
	}
	if where == "" {
		return out
	}
	for _, t := range sortedKeys(r.Targets) {
		if !listed[t] && t != "help" {
			out = append(out, Finding{at("Makefile", r.Targets[t]), fmt.Sprintf("target %q is missing from the table of make targets in %s: add a row for it", t, where)})
		}
	}
	return out
}

// CheckMakeHelp: `make help` lists every target of the Makefile.
func CheckMakeHelp(r *Repo) []Finding {
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", r.Root, "help")
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	b, err := cmd.Output()
	if err != nil {
		return []Finding{{at("Makefile", 1), fmt.Sprintf("make help failed (%v): fix the help target", err)}}
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	var out []Finding
	for _, t := range sortedKeys(r.Targets) {
		if !listed[t] {
			out = append(out, Finding{at("Makefile", r.Targets[t]), fmt.Sprintf("make help does not list target %q: give its rule a \"## what it does\" comment, and check that help's pattern matches its name", t)})
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
