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
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// good are flags that pass; each case changes one.
var good = map[string]string{
	"module": "example.com/widget-controller", "group": "apps.example.com",
	"version": "v1alpha1", "kind": "Widget",
}

func args(t *testing.T, out string, change map[string]string) []string {
	t.Helper()
	var a []string
	for k, v := range good {
		if c, ok := change[k]; ok {
			v = c
		}
		a = append(a, "--"+k, v)
	}
	return append(a, "--out", out)
}

// TestBadInput: one line naming the flag and the rule, exit 2, nothing written.
func TestBadInput(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change map[string]string
		out    string
		want   string
	}{
		{"module upper-case element", map[string]string{"module": "example.com/Widget Controller"}, "", "--module:"},
		{"module empty", map[string]string{"module": ""}, "", "--module: is required"},
		{"module leading dot", map[string]string{"module": ".example.com/w"}, "", "--module:"},
		{"group without a dot", map[string]string{"group": "apps"}, "", "--group: \"apps\" must be a DNS-1123 subdomain with a dot"},
		{"group upper case", map[string]string{"group": "Apps.example.com"}, "", "--group:"},
		{"group underscore", map[string]string{"group": "my_apps.example.com"}, "", "--group:"},
		{"kind lower case", map[string]string{"kind": "widget"}, "", "--kind: \"widget\" must be UpperCamelCase"},
		{"kind with dash", map[string]string{"kind": "Big-Widget"}, "", "--kind:"},
		{"kind all caps", map[string]string{"kind": "WIDGET"}, "", "--kind:"},
		{"version without v", map[string]string{"version": "1"}, "", "--version: \"1\" is not a Kubernetes API version"},
		{"version v0", map[string]string{"version": "v0"}, "", "--version:"},
		{"version gamma", map[string]string{"version": "v1gamma1"}, "", "--version:"},
		{"version beta without number", map[string]string{"version": "v1beta"}, "", "--version:"},
		{"out non-empty", nil, full, "--out: " + full + " must be a new or empty directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "new")
			}
			var stderr bytes.Buffer
			code := run(args(t, out, c.change), &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "fork: "+c.want) {
				t.Errorf("stderr = %q, want one line starting %q", msg, "fork: "+c.want)
			}
			if c.out == "" {
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("%s was written (stat: %v)", out, err)
				}
			}
		})
	}
}

func TestGoodInputParses(t *testing.T) {
	for _, change := range []map[string]string{
		nil,
		{"version": "v1"}, {"version": "v2beta3"}, {"kind": "CronJob"}, {"group": "a-b.c.io"},
	} {
		if _, err := parse(args(t, filepath.Join(t.TempDir(), "new"), change), os.Stderr); err != nil {
			t.Errorf("%v: %v", change, err)
		}
	}
}

func TestPlural(t *testing.T) {
	for kind, want := range map[string]string{
		"Widget": "widgets", "Policy": "policies", "Key": "keys", "Box": "boxes",
		"Bus": "buses", "Quiz": "quizes", "Batch": "batches", "Mesh": "meshes", "Book": "books",
		"NetworkPolicy": "networkpolicies",
	} {
		if got := pluralOf(kind); got != want {
			t.Errorf("pluralOf(%s) = %s, want %s", kind, got, want)
		}
	}
	n, err := newNames("example.com/p", "policy.example.com", "v1beta1", "Policy", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if n.capPlural() != "Policies" {
		t.Errorf("capPlural = %s, want Policies", n.capPlural())
	}
	n, _ = newNames("example.com/p", "policy.example.com", "v1beta1", "Person", "people", "")
	if n.Plural != "people" || n.capPlural() != "People" {
		t.Errorf("--plural people: %s, %s", n.Plural, n.capPlural())
	}
}

func TestRename(t *testing.T) {
	n, err := newNames("example.com/policy-controller", "policy.example.com", "v1beta1", "Policy", "", "")
	if err != nil {
		t.Fatal(err)
	}
	r := newRenamer(n)
	for in, want := range map[string]string{
		`import webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"`: `import policyv1beta1 "example.com/policy-controller/pkg/apis/policy/v1beta1"`,
		"apiVersion: webapp.ydzs.io/v2":                                "apiVersion: policy.example.com/v1beta1",
		"f.Webapp().V2().Books()":                                      "f.Policy().V1beta1().Policies()",
		"c.WebappV2().Books(ns)":                                       "c.PolicyV1beta1().Policies(ns)",
		"book_controller_reconcile_total":                              "policy_controller_reconcile_total",
		"books.webapp.ydzs.io":                                         "policies.policy.example.com",
		"AllowWatchBookmarks: true, bookKey":                           "AllowWatchBookmarks: true, policyKey",
		"BOOK_DISABLE_LAYERS CHAOS_BOOKS":                              "POLICY_DISABLE_LAYERS CHAOS_POLICIES",
		"shortName=bk,":                                                "shortName=pc,",
		"webapp.ydzs.io/v3alpha1 webapp.ydzs.io/v2beta1":               "policy.example.com/v3alpha1 policy.example.com/v2beta1",
		"pkg/controller/bookcache.go":                                  "pkg/controller/policycache.go",
	} {
		if got := r.rename(in); got != want {
			t.Errorf("rename(%q)\n  = %q\n want %q", in, got, want)
		}
	}
}

func TestCutMarkers(t *testing.T) {
	in := "a\n// fork:begin ui\nb\n# fork:begin shards\nc\n# fork:end shards\n// fork:end ui\nd <!-- fork:line chaos -->\ne\n"
	whole, err := cutMarkers(in, func(string) bool { return false })
	if err != nil || whole != "a\nb\nc\nd\ne\n" {
		t.Errorf("whole: %q, %v", whole, err)
	}
	minimal, err := cutMarkers(in, func(string) bool { return true })
	if err != nil || minimal != "a\ne\n" {
		t.Errorf("minimal: %q, %v", minimal, err)
	}
	inverse := "x // fork:line ui\ny // fork:line !ui\n<!-- fork:begin !ui -->\nz\n<!-- fork:end !ui -->\n"
	if got, _ := cutMarkers(inverse, func(string) bool { return false }); got != "x\n" {
		t.Errorf("!ui with ui kept: %q", got)
	}
	if got, _ := cutMarkers(inverse, func(string) bool { return true }); got != "y\nz\n" {
		t.Errorf("!ui with ui left out: %q", got)
	}
	for _, bad := range []string{
		"// fork:begin ui\n", "// fork:end ui\n", "// fork:begin ui\n// fork:end shards\n",
		"// fork:begin nosuchpart\n// fork:end nosuchpart\n", "// fork:start ui\n", "x // fork:" + "line nosuchpart\n",
	} {
		if _, err := cutMarkers(bad, func(string) bool { return false }); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestMarkersInTree: every marker of every tracked file is balanced and
// names a known part, and every path of the parts table exists.
func TestMarkersInTree(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	list, err := exec.Command("git", "-C", dir, "ls-files").Output()
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Fields(string(list))
	for _, p := range files {
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		if _, err := cutMarkers(string(data), func(string) bool { return true }); err != nil {
			t.Errorf("%s:%v", p, err)
		}
	}
	for name, pt := range parts {
		for _, q := range pt.paths {
			found := false
			for _, f := range files {
				if f == q || strings.HasPrefix(f, q+"/") {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("part %s: %s is no tracked file or directory", name, q)
			}
		}
	}
}

// TestNoV1InForks: no file a fork keeps names webapp.ydzs.io/v1 outside
// `fork:begin v2` blocks. A fork renames v2 alone and serves no v1, so a
// leftover such as a test's owner reference names a version its API server
// does not know (the garbage collector never resolves that owner).
// manifests/crd.yaml is regenerated in the fork, and its CHANGELOG.md starts
// empty.
func TestNoV1InForks(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	list, err := exec.Command("git", "-C", dir, "ls-files").Output()
	if err != nil {
		t.Fatal(err)
	}
	v1 := regexp.MustCompile(`webapp\.ydzs\.io/v1\b`)
	always := dropper(false, nil)
	for _, p := range strings.Fields(string(list)) {
		if dropped(p, always) || p == "manifests/crd.yaml" || p == "CHANGELOG.md" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		kept, err := cutMarkers(string(data), always)
		if err != nil {
			continue // TestMarkersInTree reports it
		}
		for i, line := range strings.Split(kept, "\n") {
			if v1.MatchString(line) {
				t.Errorf("%s: a fork keeps line %q (line %d after cutting its markers), which names webapp.ydzs.io/v1", p, strings.TrimSpace(line), i+1)
			}
		}
	}
}
