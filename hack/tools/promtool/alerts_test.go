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

package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The PrometheusRule of the prometheus component and its promtool tests.
const (
	componentDir = "manifests/components/prometheus"
	ruleFile     = "prometheus_rule.yaml"
	ruleTestFile = "prometheus_rule_test.yaml"
	// rulesName is what the test file's rule_files names: the rule groups
	// taken out of the PrometheusRule.
	rulesName = "book-controller.rules.yaml"
)

// TestAlertRules checks the PrometheusRule's rules with `promtool check
// rules` (lint warnings fatal) and runs their unit tests with `promtool test
// rules`, and checks that every alert has a case where it fires and one
// where it must not.
func TestAlertRules(t *testing.T) {
	root := repoRoot(t)
	promtool := buildPromtool(t, root)
	dir := t.TempDir()

	rules := ruleGroups(t, filepath.Join(root, componentDir, ruleFile))
	if err := os.WriteFile(filepath.Join(dir, rulesName), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(root, componentDir, ruleTestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ruleTestFile), tests, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("promtool check rules", func(t *testing.T) {
		run(t, dir, promtool, "check", "rules", "--lint=all", "--lint-fatal", rulesName)
	})
	t.Run("promtool test rules", func(t *testing.T) {
		run(t, dir, promtool, "test", "rules", ruleTestFile)
	})
	t.Run("every alert fires in one case and stays silent in another", func(t *testing.T) {
		fires, silent := testedAlerts(t, tests)
		for _, alert := range alertNames(t, rules) {
			if !slices.Contains(fires, alert) {
				t.Errorf("%s: no case in %s where it fires", alert, ruleTestFile)
			}
			if !slices.Contains(silent, alert) {
				t.Errorf("%s: no case in %s where it must not fire", alert, ruleTestFile)
			}
		}
	})
}

// ruleGroups is the PrometheusRule's spec: the groups of a Prometheus rule
// file, which is what promtool reads.
func ruleGroups(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if obj.Kind != "PrometheusRule" || obj.Spec["groups"] == nil {
		t.Fatalf("%s: kind %q with no spec.groups, want a PrometheusRule", path, obj.Kind)
	}
	out, err := yaml.Marshal(obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func alertNames(t *testing.T, rules []byte) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &f); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				names = append(names, r.Alert)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	return names
}

// testedAlerts lists the alerts the test file expects to fire at some
// evaluation, and those it expects silent at some evaluation.
func testedAlerts(t *testing.T, tests []byte) (fires, silent []string) {
	t.Helper()
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(tests, &f); err != nil {
		t.Fatal(err)
	}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires = append(fires, a.Alertname)
			} else {
				silent = append(silent, a.Alertname)
			}
		}
	}
	return fires, silent
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	if err != nil {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
}

// buildPromtool builds promtool at the version this module pins, once, into
// _output/promtool/<version>/ (git-ignored), and returns its path.
// $PROMTOOL, when set, is used instead.
func buildPromtool(t *testing.T, root string) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	version, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/prometheus/prometheus").Output()
	if err != nil {
		t.Fatalf("reading the pinned Prometheus version: %v", err)
	}
	bin := filepath.Join(root, "_output", "promtool", strings.TrimSpace(string(version)), "promtool")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building promtool %s into %s (minutes the first time: Prometheus has many dependencies)", strings.TrimSpace(string(version)), bin)
	// Into a temporary name first, so an interrupted build leaves nothing
	// that a later run would take as done.
	tmp := bin + ".tmp"
	// remove_all_sd leaves out Prometheus's service discovery plugins
	// (its plugins package, with the cloud SDKs), which rule checks and rule
	// tests never use: about 250 fewer packages to compile on a cold run.
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "remove_all_sd", "-o", tmp, "github.com/prometheus/prometheus/cmd/promtool")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building promtool: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// repoRoot is the repository, three directories up from this module.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, componentDir, ruleFile)); err != nil {
		t.Fatalf("%s is not the repository root: %v", root, err)
	}
	return root
}
