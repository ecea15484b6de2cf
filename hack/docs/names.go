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
	"regexp"
	"slices"
	"strings"
)

// flagWord matches a flag as written on a command line.
var flagWord = regexp.MustCompile(`^(--?)([A-Za-z][A-Za-z0-9_-]*)(=.*)?$`)

// statedDefault matches what follows a flag's code span when a doc states
// its default: "`--workers`, 128", "(`--leader-elect-lease-duration`,
// 15 s", "`--event-qps` (10/s", "default `0`".
var statedDefault = regexp.MustCompile("^\\s*[,(]\\s*(?:default:?\\s+)?(\\d[\\d,.]*(?:\\s?(?:ms|s|m|h|min)\\b|/s)?)" +
	"|^\\s*[,(]?\\s*\\(?default:?\\s+`([^`]*)`")

// valueIsDefault matches what follows a span such as `--shards 1` that says
// its value is the default.
var valueIsDefault = regexp.MustCompile(`^\s*\(?(?:the|by) default\b`)

// CheckFlags: every flag a doc names exists, with the default the doc
// states. A code span that starts with a flag names one of the
// controller's (docs/flags.md), or else of the controller-runtime twin or
// of the bench (their main packages); flags after `book-controller` or
// `./cmd/controller` are the controller's, those in BENCH_FLAGS='…' or
// after `go run .` in the bench's directory the bench's. Write
// another program's flag with the program first (`kube-apiserver --x`).
func CheckFlags(r *Repo, d *Docs) []Finding {
	var out []Finding
	for _, doc := range d.prose() {
		for _, s := range doc.spans {
			out = append(out, r.checkFlagSpan(doc.path, s)...)
			out = append(out, r.checkCommandFlags(doc.path, s.line, s.text)...)
		}
		for _, l := range doc.fenced {
			out = append(out, r.checkCommandFlags(doc.path, l.line, l.text)...)
		}
	}
	return out
}

// checkFlagSpan checks a span that starts with a flag: the flag exists,
// and a default stated after it is the flag's.
func (r *Repo) checkFlagSpan(file string, s codeSpan) []Finding {
	w := words(s.text)
	if len(w) == 0 {
		return nil
	}
	m := flagWord.FindStringSubmatch(w[0])
	if m == nil {
		return nil
	}
	dash, name, value := m[1], m[2], strings.TrimPrefix(m[3], "=")
	f := r.Flags.ByName[name]
	known := r.Flags.has(name) || r.TwinFlags[name] || (r.TwinZapFlags && strings.HasPrefix(name, "zap-"))
	if dash == "-" {
		known = known || r.BenchFlags[name]
	}
	if !known {
		return []Finding{{at(file, s.line), fmt.Sprintf("names the flag %s%s, which is no flag of book-controller (%s), the twin or the bench: fix the name, or write the command it belongs to before it, in the same code span (`go test -race`, `kube-apiserver --feature-gates=…`)", dash, name, FlagsDoc)}}
	}
	if f == nil {
		return nil
	}
	if value == "" && len(w) == 2 && !strings.HasPrefix(w[1], "-") {
		value = w[1]
	}
	stated := ""
	if value != "" {
		if valueIsDefault.MatchString(s.after) {
			stated = value
		}
	} else if m := statedDefault.FindStringSubmatch(s.after); m != nil {
		stated = m[1] + m[2]
		stated = strings.Replace(stated, "min", "m", 1)
	}
	if stated != "" && !sameValue(f, stated) {
		return []Finding{{at(file, s.line), fmt.Sprintf("gives --%s the default %s, but its default is %s (%s:%d): fix the figure", name, stated, orEmpty(f.Default), FlagsDoc, f.Line)}}
	}
	return nil
}

func orEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// checkCommandFlags checks the flags of the controller's and the bench's
// command lines in a span or a fenced line.
func (r *Repo) checkCommandFlags(file string, line int, text string) []Finding {
	var out []Finding
	w := words(text)
	owner := ""
	for i, word := range w {
		switch {
		case word == "book-controller" || strings.HasSuffix(word, "/cmd/controller") || word == "./cmd/controller":
			owner = "book-controller"
			continue
		case strings.HasPrefix(word, "BENCH_FLAGS="):
			owner = "bench"
			word = strings.TrimPrefix(word, "BENCH_FLAGS=")
		case word == "." && i > 1 && w[i-1] == "run" && strings.Contains(text, "test/bench"):
			owner = "bench"
			continue
		case word == "&&" || word == ";" || word == "|" || word == "#":
			owner = ""
			continue
		}
		m := flagWord.FindStringSubmatch(word)
		if owner == "" || m == nil {
			continue
		}
		name := m[2]
		switch {
		case owner == "book-controller" && !r.Flags.has(name):
			out = append(out, Finding{at(file, line), fmt.Sprintf("runs book-controller with %s, which is not one of its flags (%s): fix the flag", word, FlagsDoc)})
		case owner == "bench" && !r.BenchFlags[name]:
			out = append(out, Finding{at(file, line), fmt.Sprintf("runs the bench with %s, which is not one of its flags (test/bench/main.go): fix the flag", word)})
		}
	}
	return out
}

// metricToken matches a word that may be a metric name.
var metricToken = regexp.MustCompile(`[a-z][a-z0-9]*_[a-z0-9_]*[a-z0-9]`)

// metricPrefixes are the first words of the metrics the code defines
// (book_, workqueue_, rest_, leader_): a word of a doc that starts with one
// of them names a metric.
func (r *Repo) metricPrefixes() map[string]bool {
	p := map[string]bool{}
	for m := range r.Metrics {
		first, _, _ := strings.Cut(m, "_")
		p[first+"_"] = true
	}
	return p
}

// metricNames returns the metric names in text: words with a metric prefix,
// not file names (of Go tests) and not prefixes (workqueue_*).
func (r *Repo) metricNames(text string, prefixes map[string]bool) []string {
	var out []string
	for _, loc := range metricToken.FindAllStringIndex(text, -1) {
		word, rest := text[loc[0]:loc[1]], text[loc[1]:]
		if loc[0] > 0 && (isWordByte(text[loc[0]-1]) || text[loc[0]-1] == '.' || text[loc[0]-1] == '/') {
			continue
		}
		if strings.HasPrefix(rest, "_") || strings.HasPrefix(rest, "*") || (strings.HasPrefix(rest, ".") && len(rest) > 1 && isWordByte(rest[1])) {
			continue
		}
		first, _, _ := strings.Cut(word, "_")
		if prefixes[first+"_"] {
			out = append(out, word)
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// hasMetric tells whether name is a metric of the code, or a series of a
// histogram of it.
func (r *Repo) hasMetric(name string) bool {
	if _, ok := r.Metrics[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if _, ok := r.Metrics[base]; ok {
				return true
			}
		}
	}
	return false
}

// OperationsDoc is the page that documents every metric, Ready reason and
// alert.
const OperationsDoc = "docs/operations.md"

// BehaviourDoc is the page that documents every Ready and event reason.
const BehaviourDoc = "docs/behaviour.md"

// CheckMetrics: every metric a doc names exists in the code, and every
// metric the code defines is documented in docs/operations.md.
func CheckMetrics(r *Repo, d *Docs) []Finding {
	var out []Finding
	prefixes := r.metricPrefixes()
	for _, doc := range d.prose() {
		check := func(line int, text string) {
			for _, m := range r.metricNames(text, prefixes) {
				if !r.hasMetric(m) {
					out = append(out, Finding{at(doc.path, line), fmt.Sprintf("names the metric %s, which the code does not define: fix the name (the metrics are in pkg/metrics and pkg/manager/metrics.go)", m)})
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
	documented := spanSet(d.byPath(OperationsDoc), func(t string) []string { return r.metricNames(t, prefixes) })
	for _, m := range sortedKeys(r.Metrics) {
		if !documented[m] {
			out = append(out, Finding{r.Metrics[m], fmt.Sprintf("the metric %s is not documented in %s: add a row for it to its Metrics table", m, OperationsDoc)})
		}
	}
	return out
}

// spanSet returns what pick finds in the code spans of doc.
func spanSet(doc *mdDoc, pick func(string) []string) map[string]bool {
	set := map[string]bool{}
	if doc == nil {
		return set
	}
	for _, s := range doc.spans {
		for _, x := range pick(s.text) {
			set[x] = true
		}
	}
	return set
}

// commonCamelPrefix is the longest run of whole CamelCase words that
// every name starts with ("ConfigMap" for ConfigMapReady and
// ConfigMapConflict); "" when they share none.
func commonCamelPrefix(names []string) string {
	if len(names) == 0 {
		return ""
	}
	p := names[0]
	for _, n := range names[1:] {
		for !strings.HasPrefix(n, p) {
			p = p[:len(p)-1]
		}
	}
	// Cut back to a word boundary: the next letter of every name is upper case.
	for len(p) > 0 {
		ok := true
		for _, n := range names {
			if len(n) > len(p) && !(n[len(p)] >= 'A' && n[len(p)] <= 'Z') {
				ok = false
			}
		}
		if ok {
			break
		}
		p = p[:len(p)-1]
	}
	if slices.Contains(names, p) {
		// One name, or one that starts all the others: its last word is not
		// shared.
		i := strings.LastIndexFunc(p, func(r rune) bool { return r >= 'A' && r <= 'Z' })
		p = p[:max(i, 0)]
	}
	return p
}

var (
	camelName   = regexp.MustCompile(`^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$`)
	camelInText = regexp.MustCompile(`[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+`)
)

// namesLike returns a span's text when it is one CamelCase word that starts
// with prefix (and is longer): a reason, or an alert.
func namesLike(prefix string) func(string) []string {
	return func(t string) []string {
		if prefix != "" && camelName.MatchString(t) && strings.HasPrefix(t, prefix) && t != prefix {
			return []string{t}
		}
		return nil
	}
}

// CheckReasons: every Ready or event reason a doc names is a constant of
// pkg/controller (Reason*, Event*), and every Ready reason is documented in
// docs/operations.md and docs/behaviour.md, every event reason in the
// latter. A reason is a code span of one CamelCase word that starts like
// the Ready reasons do.
func CheckReasons(r *Repo, d *Docs) []Finding {
	var out []Finding
	var names []string
	for n := range r.Reasons {
		names = append(names, n)
	}
	like := namesLike(commonCamelPrefix(names))
	for _, doc := range d.prose() {
		for _, s := range doc.spans {
			for _, n := range like(s.text) {
				_, ready := r.Reasons[n]
				_, event := r.EventReasons[n]
				if !ready && !event {
					out = append(out, Finding{at(doc.path, s.line), fmt.Sprintf("names the reason %s, which pkg/controller does not define (Reason* in status.go, Event* in events.go): fix the name", n)})
				}
			}
		}
	}
	camelWords := func(t string) []string { return camelInText.FindAllString(t, -1) }
	for _, page := range []string{OperationsDoc, BehaviourDoc} {
		documented := spanSet(d.byPath(page), camelWords)
		for _, n := range sortedKeys(r.Reasons) {
			if !documented[n] {
				out = append(out, Finding{r.Reasons[n], fmt.Sprintf("the Ready reason %s is not documented in %s: add it to its table of reasons", n, page)})
			}
		}
		if page != BehaviourDoc {
			continue
		}
		for _, n := range sortedKeys(r.EventReasons) {
			if !documented[n] {
				out = append(out, Finding{r.EventReasons[n], fmt.Sprintf("the event reason %s is not documented in %s: add it to its table of conditions and events", n, page)})
			}
		}
	}
	return out
}

// CheckAlerts: every alert a doc names is one of the PrometheusRule's, and
// each of them has a section in docs/operations.md (what it means, what to
// do).
func CheckAlerts(r *Repo, d *Docs) []Finding {
	var out []Finding
	like := namesLike(commonCamelPrefix(sortedKeys(r.Alerts)))
	for _, doc := range d.prose() {
		for _, s := range doc.spans {
			for _, n := range like(s.text) {
				if _, ok := r.Alerts[n]; !ok {
					out = append(out, Finding{at(doc.path, s.line), fmt.Sprintf("names the alert %s, which manifests/components/prometheus/prometheus_rule.yaml does not define: fix the name", n)})
				}
			}
		}
	}
	ops := d.byPath(OperationsDoc)
	for _, n := range sortedKeys(r.Alerts) {
		if ops == nil || !ops.anchors[strings.ToLower(n)] {
			out = append(out, Finding{r.Alerts[n], fmt.Sprintf("the alert %s has no section in %s: add a \"### %s\" heading saying when it fires and what to do", n, OperationsDoc, n)})
		}
	}
	return out
}

var (
	// qualified matches pkg.Name, Type.Method and pkg.Type.Field.
	qualified = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)`)
	callForm  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\(\)$`)
	lowerCame = regexp.MustCompile(`^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$`)
	testName  = regexp.MustCompile(`^(?:Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*$`)
)

// CheckIdentifiers: a code span that is one Go name of this repository's
// shape (camel case starting lower-case, name(), pkg.Name for one of its
// own packages, or a test, benchmark or fuzz target) names something its
// Go code has. Another project's name is written with
// its package (cache.WaitForCacheSync) or its project
// (sample-controller's `enqueueFoo` is read as its own).
func CheckIdentifiers(r *Repo, d *Docs) []Finding {
	var out []Finding
	for _, doc := range d.prose() {
		for _, s := range doc.spans {
			if msg := r.checkName(s.text); msg != "" && !r.foreignOwner(s) {
				out = append(out, Finding{at(doc.path, s.line), msg})
			}
		}
	}
	return out
}

// checkName returns what is wrong with a name, "" when it exists or is not
// a name of this repository's shape.
func (r *Repo) checkName(t string) string {
	switch {
	case qualified.MatchString(t) && !strings.ContainsAny(t, " /"):
		m := qualified.FindStringSubmatch(t)
		decls, ours := r.pkgDecls[m[1]]
		if ours && !decls[m[2]] && !r.idents[m[2]] {
			return fmt.Sprintf("names %s.%s, which package %s does not declare: fix the name", m[1], m[2], m[1])
		}
	case testName.MatchString(t):
		if !r.idents[t] {
			return fmt.Sprintf("names the test %s, which no test file declares: fix the name", t)
		}
	case callForm.MatchString(t):
		if n := callForm.FindStringSubmatch(t)[1]; !r.idents[n] {
			return fmt.Sprintf("names %s(), which this repository's Go code does not have: fix the name", n)
		}
	case lowerCame.MatchString(t):
		if !r.idents[t] {
			return fmt.Sprintf("names %s, which this repository's Go code does not have: fix the name, or say whose it is (sample-controller's `%s`)", t, t)
		}
	}
	return ""
}

// foreignOwner tells whether the doc says whose the name or path is:
// right before it ("sample-controller's `enqueueFoo`"), as another
// project's earlier in its sentence ("controller-runtime's `Reconcile`
// and `startWatches`"), or by another project's path in its sentence
// ("`doWatch` in `controller-runtime/pkg/builder/controller.go`").
func (r *Repo) foreignOwner(s codeSpan) bool {
	if owned(s.before) {
		return true
	}
	before, after := s.before, s.after
	if ends := sentenceEnd.FindAllStringIndex(before, -1); len(ends) > 0 {
		before = before[ends[len(ends)-1][1]:]
	}
	if end := sentenceEnd.FindStringIndex(after); end != nil {
		after = after[:end[0]]
	}
	for _, m := range foreignPath.FindAllStringSubmatch(before+" "+after, -1) {
		if !r.top[m[1]] {
			return true
		}
	}
	return false
}

// foreignPath matches a code span holding a path whose first element names
// a project (controller-runtime/…, k8s.io/…).
var foreignPath = regexp.MustCompile("`([A-Za-z0-9]+[-.][A-Za-z0-9.-]*)/[^`\\s]*`")
