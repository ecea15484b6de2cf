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
	"go/ast"
	"go/token"
	"os"
	"path"
	"regexp"
	"strings"
)

// commentLine is one line of a comment: in Go code, or a "#" line of a
// manifest, the Makefile, the Dockerfile or a script. prev is the text of
// the sentence its previous lines left unfinished, which may say whose a
// name is.
type commentLine struct {
	file string
	line int
	text string
	prev string
}

// hashCommented tells which files' "#" lines are comments the check reads.
func hashCommented(rel string) bool {
	base := baseName(rel)
	switch {
	case base == "Makefile" || base == "Dockerfile" || rel == ".ci/run":
		return true
	case strings.HasSuffix(rel, ".sh"):
		return true
	case strings.HasSuffix(rel, ".yaml") || strings.HasSuffix(rel, ".yml"):
		// Manifests and fixtures of our own; not the CRDs other projects
		// generated (test/integration/deploy/testdata is skipped anyway).
		return strings.HasPrefix(rel, "manifests/") || strings.HasPrefix(rel, ".github/")
	}
	return false
}

// comments returns every comment line of the tree's hand-written code and
// manifests.
func (r *Repo) comments() ([]commentLine, error) {
	out := append([]commentLine(nil), r.goComments...)
	for _, rel := range sortedKeys(r.files) {
		switch {
		case fixture(rel):
		case hashCommented(rel):
			b, err := os.ReadFile(joinRoot(r.Root, rel))
			if err != nil {
				return nil, err
			}
			prev := ""
			for i, l := range strings.Split(string(b), "\n") {
				t := strings.TrimSpace(l)
				if !strings.HasPrefix(t, "#") || strings.HasPrefix(t, "#!") {
					prev = ""
					continue
				}
				t = strings.TrimSpace(strings.TrimLeft(t, "#"))
				out = append(out, commentLine{rel, i + 1, t, prev})
				prev = lastSentence(prev + " " + t)
			}
		}
	}
	return out, nil
}

// addGoComments records the comment lines of a parsed Go file (loadGo
// parses each file once, for its names and its comments).
func (r *Repo) addGoComments(fset *token.FileSet, rel string, file *ast.File) {
	for _, g := range file.Comments {
		prev := ""
		for _, c := range g.List {
			first := fset.Position(c.Pos()).Line
			for i, l := range strings.Split(c.Text, "\n") {
				l = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(l, "//"), "/*"))
				if directive(l) {
					continue
				}
				r.goComments = append(r.goComments, commentLine{rel, first + i, l, prev})
				prev = lastSentence(prev + " " + l)
			}
		}
	}
}

// directive tells whether a comment line is an instruction to a tool
// (kubebuilder markers, go:build, nolint), not prose.
func directive(l string) bool {
	return strings.HasPrefix(l, "+") || strings.HasPrefix(l, "go:") || strings.HasPrefix(l, "nolint")
}

var (
	commentCamel = regexp.MustCompile(`[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*`)
	commentCall  = regexp.MustCompile(`[A-Z][A-Za-z0-9_]*\(`)
	commentWord  = regexp.MustCompile("[^\\s,;\"'`]+")
	commentQual  = regexp.MustCompile(`[a-z][a-z0-9]*\.[A-Z][A-Za-z0-9_]*`)
	// ownerBefore matches text that ends by saying whose the next name is:
	// a possessive ("client-go's "), or an API group ("events.k8s.io ").
	ownerBefore = regexp.MustCompile(`(?:[A-Za-z0-9.-]+['’]s|[a-z0-9-]+\.[a-z0-9.-]*[a-z])\s+$`)
	// projectOwner matches another project's or package's possessive, whose
	// names the rest of its sentence may list: "k8s.io/apiserver's x and
	// y", "controller-runtime's x, y".
	projectOwner = regexp.MustCompile(`[A-Za-z0-9]+[-./][A-Za-z0-9./-]*['’]s\s`)
	// sentenceEnd matches the end of a sentence.
	sentenceEnd = regexp.MustCompile(`[.!?;](\s|$)`)
	// properNoun matches words such as gRPC or eBPF: one lower-case letter,
	// then capitals only.
	properNoun = regexp.MustCompile(`^[a-z][A-Z0-9]+$`)
)

// CheckComments: a comment that cites a file (a path of this repository,
// or a bare name of a Go, Markdown or shell file) names one that exists, and one that cites a
// function (a camel-case name that starts lower-case, name(…), or pkg.Name of one of our
// packages) names one that exists. Another project's name is written after
// its owner ("client-go's isInInitialList") or with its path
// (tools/metrics.Register).
func CheckComments(r *Repo) ([]Finding, error) {
	lines, err := r.comments()
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, c := range lines {
		for _, msg := range r.commentFiles(c) {
			out = append(out, Finding{at(c.file, c.line), msg})
		}
		for _, msg := range r.commentNames(c) {
			out = append(out, Finding{at(c.file, c.line), msg})
		}
	}
	return out, nil
}

// commentFiles checks the paths and file names a comment line cites,
// relative to the root, the file's module or the file's directory.
func (r *Repo) commentFiles(c commentLine) []string {
	var out []string
	dir, mod := path.Dir(c.file), r.moduleOf(c.file)
	for _, loc := range commentWord.FindAllStringIndex(c.text, -1) {
		w := strings.TrimSuffix(strings.TrimSuffix(c.text[loc[0]:loc[1]], "'s"), "’s")
		msg := ""
		if p, ok := r.repoPath(w); ok {
			if !r.exists(p) && !r.exists(path.Join(mod, p)) && !r.exists(path.Join(dir, p)) {
				msg = fmt.Sprintf("the comment cites %s, which does not exist: fix the path", p)
			}
		} else if f, ok := bareFile(w); ok && !r.bases[f] {
			msg = fmt.Sprintf("the comment cites the file %s, which is nowhere in the tree: fix the name, or give another project's file with its path (client-go/tools/cache/%s)", f, f)
		}
		if msg != "" && !owned(c.prev+" "+c.text[:loc[0]]) {
			out = append(out, msg)
		}
	}
	return out
}

// commentNames checks the functions and other names a comment line cites.
func (r *Repo) commentNames(c commentLine) []string {
	text, mod := c.text, r.moduleOf(c.file)
	var out []string
	seen := map[string]bool{}
	report := func(name, msg string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, msg)
		}
	}
	for _, loc := range commentCamel.FindAllStringIndex(text, -1) {
		name := text[loc[0]:loc[1]]
		if !r.knownIn(mod, name) && !properNoun.MatchString(name) && standalone(text, loc) && !owned(c.prev+" "+text[:loc[0]]) {
			report(name, fmt.Sprintf("the comment cites %s, which this repository's Go code does not have: fix the name, or say whose it is (client-go's %s)", name, name))
		}
	}
	for _, loc := range commentCall.FindAllStringIndex(text, -1) {
		name := text[loc[0] : loc[1]-1]
		if !r.knownIn(mod, name) && upperCamel.MatchString(name) && standalone(text, []int{loc[0], loc[1] - 1}) && !owned(c.prev+" "+text[:loc[0]]) {
			report(name, fmt.Sprintf("the comment cites %s(…), which this repository's Go code does not have: fix the name", name))
		}
	}
	for _, loc := range commentQual.FindAllStringIndex(text, -1) {
		if !standalone(text, loc) || owned(c.prev+" "+text[:loc[0]]) {
			continue
		}
		pkg, name, _ := strings.Cut(text[loc[0]:loc[1]], ".")
		if decls, ours := r.pkgDecls[pkg]; ours && !decls[name] && !r.knownIn(mod, name) {
			report(pkg+"."+name, fmt.Sprintf("the comment cites %s.%s, which package %s does not declare: fix the name", pkg, name, pkg))
		}
	}
	return out
}

// lastSentence is the unfinished sentence at the end of text, all a later
// line needs to know whose its names are.
func lastSentence(text string) string {
	if ends := sentenceEnd.FindAllStringIndex(text, -1); len(ends) > 0 {
		text = text[ends[len(ends)-1][1]:]
	}
	if len(text) > 300 {
		text = text[len(text)-300:]
	}
	return text
}

// owned tells whether the text before a name says whose it is: a
// possessive right before it, or another project's earlier in its sentence.
func owned(before string) bool {
	if ownerBefore.MatchString(before) {
		return true
	}
	return projectOwner.MatchString(lastSentence(before))
}

// standalone tells whether the match at loc is a name of its own, not part
// of a path, a URL, a flag or a longer word.
func standalone(text string, loc []int) bool {
	if loc[0] > 0 {
		if c := text[loc[0]-1]; c == '/' || c == '-' || c == '.' || c == '_' || c == '$' || isWordByte(c) {
			return false
		}
	}
	if loc[1] < len(text) {
		if c := text[loc[1]]; c == '/' || c == '-' || c == '_' || isWordByte(c) {
			return false
		}
		if c := text[loc[1]]; c == '.' && loc[1]+1 < len(text) && text[loc[1]+1] >= 'a' && text[loc[1]+1] <= 'z' {
			return false // a file name or a host name, not a sentence's end
		}
	}
	return true
}

// upperCamel matches an exported name with an inner capital, such as
// WaitForCacheSync: before "(" it names a function (lower-case names are
// checked as camel-case words; a lone capitalised word before "(" is
// prose, and log2(n) is arithmetic).
var upperCamel = regexp.MustCompile(`^[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*$`)
