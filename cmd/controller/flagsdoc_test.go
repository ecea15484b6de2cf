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
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/hack/docs"
)

// flagsDocPath is docs/flags.md from this package's directory.
const flagsDocPath = "../../docs/flags.md"

// TestFlagsDocIsFresh holds the flag tables of docs/flags.md to the flag
// set: every flag, its type, its default and its help text. With
// UPDATE_DOCS=1 (hack/update-docs.sh) it writes them instead.
func TestFlagsDocIsFresh(t *testing.T) {
	b, err := os.ReadFile(flagsDocPath)
	if err != nil {
		t.Fatal(err)
	}
	text, want := string(b), renderFlagTables(newOptions().flagSet())
	if os.Getenv("UPDATE_DOCS") == "1" {
		updated, err := withFlagTables(text, want)
		if err != nil {
			t.Fatal(err)
		}
		if updated != text {
			if err := os.WriteFile(flagsDocPath, []byte(updated), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log("wrote docs/flags.md")
		}
		return
	}
	if msg := staleFlagTables(text, want); msg != "" {
		t.Error(msg)
	}
}

// TestStaleFlagTablesAreCaught breaks a fresh docs/flags.md three ways:
// each must be reported with its line and the command that fixes it.
func TestStaleFlagTablesAreCaught(t *testing.T) {
	want := renderFlagTables(newOptions().flagSet())
	fresh, err := withFlagTables("# Flags\n\n"+docs.GeneratedBegin+"\n"+docs.GeneratedEnd+"\n", want)
	if err != nil {
		t.Fatal(err)
	}
	if msg := staleFlagTables(fresh, want); msg != "" {
		t.Fatalf("a fresh table is reported stale: %s", msg)
	}
	workers := "| `--workers` | int | `128` |"
	if !strings.Contains(fresh, workers) {
		t.Fatalf("the rendered table has no row starting %q", workers)
	}
	cases := map[string]struct{ text, want string }{
		"a default changed": {strings.Replace(fresh, workers, "| `--workers` | int | `64` |", 1), "docs/flags.md:"},
		"a flag missing":    {strings.Replace(fresh, "| `--workers`", "| `--worker`", 1), "--worker`"},
		"no markers":        {"# Flags\n", "markers"},
	}
	for name, c := range cases {
		msg := staleFlagTables(c.text, want)
		if msg == "" || !strings.Contains(msg, c.want) || !strings.Contains(msg, "hack/update-docs.sh") {
			t.Errorf("%s: got %q, want a message with %q and hack/update-docs.sh", name, msg, c.want)
		}
	}
}

// staleFlagTables returns what is wrong with the generated part of text
// (docs/flags.md), "" when it is want.
func staleFlagTables(text, want string) string {
	begin, end, ok := generatedPart(text)
	if !ok {
		return fmt.Sprintf("docs/flags.md: the markers %q and %q are missing: put them where the flag tables go, then run hack/update-docs.sh", docs.GeneratedBegin, docs.GeneratedEnd)
	}
	got := text[begin:end]
	if got == "\n"+want+"\n" {
		return ""
	}
	line, gotLine, wantLine := firstDifference(got, "\n"+want+"\n")
	line += strings.Count(text[:begin], "\n")
	return fmt.Sprintf("docs/flags.md:%d: the flag tables are stale: the file has %q where cmd/controller's flag set gives %q: run hack/update-docs.sh", line, gotLine, wantLine)
}

// withFlagTables returns text with want between the markers.
func withFlagTables(text, want string) (string, error) {
	begin, end, ok := generatedPart(text)
	if !ok {
		return "", fmt.Errorf("docs/flags.md: the markers %q and %q are missing", docs.GeneratedBegin, docs.GeneratedEnd)
	}
	return text[:begin] + "\n" + want + "\n" + text[end:], nil
}

// generatedPart returns where the text between the markers begins and ends.
func generatedPart(text string) (int, int, bool) {
	begin := strings.Index(text, docs.GeneratedBegin)
	end := strings.Index(text, docs.GeneratedEnd)
	if begin < 0 || end < begin {
		return 0, 0, false
	}
	return begin + len(docs.GeneratedBegin), end, true
}

// firstDifference returns the first line (1-based, within a) where a and b
// differ, and both lines.
func firstDifference(a, b string) (int, string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return i, x, y
		}
	}
	return 0, "", ""
}

// renderFlagTables renders the controller's own flags, then klog's, in the
// order they are registered, and names the hidden flags kept only to be
// refused.
func renderFlagTables(fs *pflag.FlagSet) string {
	klogNames := map[string]bool{}
	goFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(goFlags)
	goFlags.VisitAll(func(f *flag.Flag) { klogNames[f.Name] = true })

	var own, logging, refused []string
	fs.SortFlags = false
	fs.VisitAll(func(f *pflag.Flag) {
		switch {
		case f.Hidden:
			refused = append(refused, "`--"+f.Name+"`")
		case klogNames[f.Name]:
			logging = append(logging, flagRow(f))
		default:
			own = append(own, flagRow(f))
		}
	})
	const head = "| Flag | Type | Default | Meaning |\n|---|---|---|---|\n"
	var b strings.Builder
	b.WriteString("### The controller's flags\n\n" + head)
	b.WriteString(strings.Join(own, "\n") + "\n\n")
	if len(refused) > 0 {
		b.WriteString("Refused with the reason, because they are gone: " + strings.Join(refused, ", ") + ".\n\n")
	}
	b.WriteString("### klog's flags (logging)\n\n" + head)
	b.WriteString(strings.Join(logging, "\n"))
	return b.String()
}

// flagRow renders one flag: name, type, default as a code span, help.
func flagRow(f *pflag.Flag) string {
	def := f.DefValue
	if f.Value.Type() == "duration" {
		def = shortDuration(def)
	}
	if def == "" {
		def = `""`
	}
	usage := strings.ReplaceAll(f.Usage, "|", `\|`)
	return fmt.Sprintf("| `--%s` | %s | `%s` | %s |", f.Name, f.Value.Type(), def, usage)
}

// shortDuration writes 10h0m0s as 10h and 1m30s as it is.
func shortDuration(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil || d == 0 {
		return s
	}
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
