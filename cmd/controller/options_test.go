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
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/controller"
)

// parseOK parses args and fails the test on any error.
func parseOK(t *testing.T, args ...string) *options {
	t.Helper()
	var usage bytes.Buffer
	o, err := parse(args, &usage)
	if err != nil {
		t.Fatalf("parse(%q): unexpected error: %v", args, err)
	}
	if usage.Len() > 0 {
		t.Errorf("parse(%q) wrote usage although it succeeded:\n%s", args, usage.String())
	}
	return o
}

// resetKlogVerbosity undoes a -v in a test: klog's flags write to klog's
// global state, not to options.
func resetKlogVerbosity(t *testing.T) {
	t.Cleanup(func() {
		if _, err := parse([]string{"-v=0"}, &bytes.Buffer{}); err != nil {
			t.Errorf("resetting -v: %v", err)
		}
	})
}

func TestParseDefaults(t *testing.T) {
	o := parseOK(t)
	want := newOptions()
	if !reflect.DeepEqual(o, want) {
		t.Errorf("parse() = %+v, want the defaults %+v", *o, *want)
	}
	if o.kubeconfig != "" || o.master != "" || o.mgr.Namespace != "" {
		t.Errorf("parse() = %+v: kubeconfig, master and namespace must default to empty", *o)
	}
}

func TestParseKubeconfigSpellings(t *testing.T) {
	const path = "/home/me/.kube/config"
	for _, args := range [][]string{
		{"-kubeconfig=" + path},
		{"-kubeconfig", path},
		{"--kubeconfig", path},
		{"--kubeconfig=" + path},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if got := parseOK(t, args...).kubeconfig; got != path {
				t.Errorf("parse(%q).kubeconfig = %q, want %q", args, got, path)
			}
		})
	}
}

func TestParseMixedFlags(t *testing.T) {
	resetKlogVerbosity(t)
	const path = "/tmp/kc"
	others := []string{"-workers", "4", "--namespace", "ns", "-v=2", "-resync-period=1m"}
	for _, kc := range [][]string{
		{"-kubeconfig=" + path},
		{"-kubeconfig", path},
		{"--kubeconfig", path},
		{"--kubeconfig=" + path},
	} {
		for _, first := range []bool{true, false} {
			var args []string
			if first {
				args = append(append(args, kc...), others...)
			} else {
				args = append(append(args, others...), kc...)
			}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				o := parseOK(t, args...)
				if o.kubeconfig != path || o.mgr.Workers != 4 || o.mgr.Namespace != "ns" || o.mgr.ResyncPeriod != time.Minute {
					t.Errorf("parse(%q) = kubeconfig %q workers %d namespace %q resync-period %v; want %q 4 \"ns\" 1m0s",
						args, o.kubeconfig, o.mgr.Workers, o.mgr.Namespace, o.mgr.ResyncPeriod, path)
				}
				if !klog.V(2).Enabled() || klog.V(3).Enabled() {
					t.Errorf("parse(%q) did not set klog's verbosity to 2", args)
				}
				// The untouched flags keep their defaults.
				d := newOptions()
				if o.master != d.master || o.qps != d.qps || o.burst != d.burst {
					t.Errorf("parse(%q) changed flags it was not given: %+v", args, *o)
				}
			})
		}
	}
}

func TestParseOtherFlags(t *testing.T) {
	o := parseOK(t, "-master", "https://127.0.0.1:6443", "--kube-api-qps=50", "-kube-api-burst", "100", "-resync-period", "0")
	if o.master != "https://127.0.0.1:6443" || o.qps != 50 || o.burst != 100 || o.mgr.ResyncPeriod != 0 {
		t.Errorf("got %+v", *o)
	}
}

// fork:begin shards
// --shards N>1 is accepted with what it needs, leader election, and with
// one namespace too: Books are sharded by UID.
func TestParseShards(t *testing.T) {
	if o := parseOK(t); o.mgr.Shards != 1 {
		t.Errorf("default --shards = %d, want 1 (unsharded)", o.mgr.Shards)
	}
	if o := parseOK(t, "--shards=3", "--leader-elect"); o.mgr.Shards != 3 {
		t.Errorf("--shards=3 parsed as %d", o.mgr.Shards)
	}
	if o := parseOK(t, "--shards=3", "--leader-elect", "--namespace=team"); o.mgr.Shards != 3 || o.mgr.Namespace != "team" {
		t.Errorf("--shards=3 --namespace=team parsed as %d, %q", o.mgr.Shards, o.mgr.Namespace)
	}
}

// fork:end shards

// Plain HTTP metrics stay the default (make run); the Deployment's
// spelling turns on HTTPS, with or without a certificate directory.
func TestParseMetricsSecure(t *testing.T) {
	if o := parseOK(t); o.mgr.MetricsSecure || o.mgr.MetricsCertDir != "" {
		t.Errorf("defaults: metricsSecure %v, metricsCertDir %q; want plain HTTP", o.mgr.MetricsSecure, o.mgr.MetricsCertDir)
	}
	o := parseOK(t, "--metrics-bind-address=:8443", "--metrics-secure")
	if !o.mgr.MetricsSecure || o.mgr.MetricsAddr != ":8443" || o.mgr.MetricsCertDir != "" {
		t.Errorf("got metricsSecure %v, addr %q, certDir %q", o.mgr.MetricsSecure, o.mgr.MetricsAddr, o.mgr.MetricsCertDir)
	}
	o = parseOK(t, "-metrics-secure", "-metrics-cert-dir", "/certs")
	if !o.mgr.MetricsSecure || o.mgr.MetricsCertDir != "/certs" {
		t.Errorf("got metricsSecure %v, certDir %q", o.mgr.MetricsSecure, o.mgr.MetricsCertDir)
	}
	if o := parseOK(t, "--metrics-secure=false"); o.mgr.MetricsSecure {
		t.Errorf("--metrics-secure=false left it on")
	}
}

// fork:begin ui
// --ui-source-url gets the slash a file's path is appended after.
func TestParseUISourceURL(t *testing.T) {
	if o := parseOK(t); o.mgr.UISourceURL != "" {
		t.Errorf("default --ui-source-url %q, want empty (the page's own)", o.mgr.UISourceURL)
	}
	o := parseOK(t, "--ui-source-url", "https://github.com/you/book-controller/blob/main")
	if want := "https://github.com/you/book-controller/blob/main/"; o.mgr.UISourceURL != want {
		t.Errorf("--ui-source-url: got %q, want %q", o.mgr.UISourceURL, want)
	}
}

// fork:end ui

// A flag's value is the next argument even when it begins with a dash: it is
// never taken for a flag itself.
func TestParseDashValue(t *testing.T) {
	for _, c := range []struct {
		args  []string
		check func(*options) bool
		want  string
	}{
		{[]string{"-kubeconfig", "-weird-name"}, func(o *options) bool { return o.kubeconfig == "-weird-name" }, `kubeconfig "-weird-name"`},
		{[]string{"--kubeconfig", "-weird-name"}, func(o *options) bool { return o.kubeconfig == "-weird-name" }, `kubeconfig "-weird-name"`},
		{[]string{"-kubeconfig", "--weird-name"}, func(o *options) bool { return o.kubeconfig == "--weird-name" }, `kubeconfig "--weird-name"`},
		// The value looks like another known flag, and still is a value.
		{[]string{"-kubeconfig", "-namespace", "-workers", "3"}, func(o *options) bool {
			return o.kubeconfig == "-namespace" && o.mgr.Workers == 3 && o.mgr.Namespace == ""
		}, `kubeconfig "-namespace", workers 3`},
		{[]string{"-kubeconfig=-x", "-namespace", "-"}, func(o *options) bool { return o.kubeconfig == "-x" && o.mgr.Namespace == "-" }, `kubeconfig "-x", namespace "-"`},
		// --kube-api-qps documents -1 as "no client-side limit".
		{[]string{"-kube-api-qps", "-1"}, func(o *options) bool { return o.qps == -1 }, "qps -1"},
		{[]string{"--kube-api-qps", "-1", "--kube-api-burst", "0"}, func(o *options) bool { return o.qps == -1 && o.burst == 0 }, "qps -1, burst 0"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			if o := parseOK(t, c.args...); !c.check(o) {
				t.Errorf("parse(%q) = %+v, want %s", c.args, *o, c.want)
			}
		})
	}
}

// Bad input is one line naming the culprit, and no usage dump.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // the error must contain it
	}{
		{[]string{"-workers", "-1"}, "--workers"},
		{[]string{"--workers=0"}, "--workers"},
		{[]string{"-workers", "four"}, "--workers"},
		{[]string{"-resync-period=1"}, "--resync-period"}, // a duration needs a unit
		{[]string{"--resync-period", "soon"}, "--resync-period"},
		{[]string{"-resync-period=-1m"}, "--resync-period"},
		{[]string{"--conflict-recheck=0s"}, "--conflict-recheck"},
		{[]string{"--kube-api-qps=-2"}, "--kube-api-qps"},
		{[]string{"--kube-api-qps=0"}, "client-go would turn into 5"}, // not silently 5 QPS
		{[]string{"--kube-api-burst=0"}, "--kube-api-burst"},
		{[]string{"--namespace", strings.Repeat("n", 64)}, "--namespace"},
		// fork:begin shards
		{[]string{"--shards=0"}, "--shards"},
		{[]string{"--shards=65", "--leader-elect"}, "--shards must be at most 64"},
		{[]string{"--shards=3"}, "--shards 3 needs --leader-elect"},
		{[]string{"--shards=3", "--leader-elect", "--shard-boundaries=0x5555555555555555,0xaaaaaaaaaaaaaaaa"}, "--shard-boundaries is gone"},
		// fork:end shards
		{[]string{"--disable-layers=own-write"}, `--disable-layers: unknown layer "own-write": want own-writes, `},
		{[]string{"--disable-layers=all,bogus"}, "--disable-layers"},
		{[]string{"--metrics-cert-dir=/certs"}, "--metrics-secure"},
		{[]string{"--metrics-secure=maybe"}, "--metrics-secure"},
		{[]string{"--webhook-loopback", "--webhook-cert-dir=/certs"}, "--webhook-loopback needs the webhook's own certificates"}, // fork:line v2
		{[]string{"--webhook-only", "--webhook-bind-address=0"}, "--webhook-only serves nothing"},                                // fork:line v2
		{[]string{"--webhook-only", "--leader-elect"}, "--webhook-only runs no controller"},                                      // fork:line v2
		{[]string{"--ui-source-url=github.com/you/book-controller"}, "--ui-source-url"},                                          // fork:line ui
		{[]string{"--ui-source-url=file:///src/"}, "absolute http(s) URL"},                                                       // fork:line ui
		{[]string{"--kubeconfig"}, "--kubeconfig"},                                                                               // no value at all
		{[]string{"-kubeconfig"}, "kubeconfig"},
		{[]string{"--bogus"}, "--bogus"},
		{[]string{"--bogus=1", "-workers", "2"}, "--bogus"},
		{[]string{"-bogus"}, "-bogus"},
		{[]string{"-workers", "2", "extra"}, `"extra"`},
		{[]string{"extra", "--workers", "2"}, `"extra"`},
		{[]string{"--", "-workers", "2"}, `"-workers"`}, // after "--" nothing is a flag
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var usage bytes.Buffer
			o, err := parse(c.args, &usage)
			if err == nil {
				t.Fatalf("parse(%q) = %+v, want an error", c.args, *o)
			}
			if errors.Is(err, errHelp) {
				t.Fatalf("parse(%q) = errHelp, want an error", c.args)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("parse(%q): error spans several lines, want one:\n%s", c.args, msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("parse(%q) = %q, want it to name %s", c.args, msg, c.want)
			}
			if o != nil {
				t.Errorf("parse(%q) returned options with its error: %+v", c.args, *o)
			}
			if usage.Len() > 0 {
				t.Errorf("parse(%q) wrote usage on an error:\n%s", c.args, usage.String())
			}
		})
	}
}

// TestParseLayers: --disable-layers turns layers off by name, "all" every
// one; --live-first=false is --disable-layers=live-first.
func TestParseLayers(t *testing.T) {
	if got := parseOK(t).mgr.Controller.Off; got != (controller.Layers{}) {
		t.Errorf("default layers off: %+v, want none", got)
	}
	if got := parseOK(t, "--disable-layers=all").mgr.Controller.Off; got != controller.AllLayers() {
		t.Errorf("--disable-layers=all: %+v, want every layer off", got)
	}
	got := parseOK(t, "--disable-layers", "own-writes, not-ready-gauge", "--disable-layers=compact-books").mgr.Controller.Off
	if want := (controller.Layers{OwnWrites: true, NotReadyGauge: true, CompactBooks: true}); got != want {
		t.Errorf("--disable-layers own-writes,not-ready-gauge + compact-books: %+v, want %+v", got, want)
	}
	if got := parseOK(t, "--live-first=false").mgr.Controller.Off; got != (controller.Layers{LiveFirst: true}) {
		t.Errorf("--live-first=false: %+v, want live-first off", got)
	}
	for _, name := range controller.LayerNames() {
		off := parseOK(t, "--disable-layers="+name).mgr.Controller.Off
		if names := off.Names(); len(names) != 1 || names[0] != name {
			t.Errorf("--disable-layers=%s turns off %v", name, names)
		}
	}
}

func TestParseHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-help"}, {"-h"}, {"-workers", "2", "--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var usage bytes.Buffer
			o, err := parse(args, &usage)
			if !errors.Is(err, errHelp) {
				t.Fatalf("parse(%q) = %v, %v; want errHelp", args, o, err)
			}
			out := usage.String()
			for _, want := range []string{"Usage of book-controller", "--kubeconfig", "--workers", "--resync-period", "--namespace", "-v, --v"} {
				if !strings.Contains(out, want) {
					t.Errorf("parse(%q) usage does not mention %q:\n%s", args, want, out)
				}
			}
		})
	}
}

func TestParseVersion(t *testing.T) {
	old := gitVersion
	gitVersion = "v9.8.7-test"
	t.Cleanup(func() { gitVersion = old })
	// --version answers even next to a flag value validate would refuse.
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--workers=0", "--version"}, {"--version", "extra"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var out bytes.Buffer
			o, err := parse(args, &out)
			if !errors.Is(err, errVersion) {
				t.Fatalf("parse(%q) = %v, %v; want errVersion", args, o, err)
			}
			want := "book-controller v9.8.7-test (commit "
			if got := out.String(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, ", built with "+runtime.Version()+")\n") {
				t.Errorf("parse(%q) wrote %q, want %q…, built with %s)", args, got, want, runtime.Version())
			}
		})
	}
}

func TestVersionStampedByTheLinker(t *testing.T) {
	oldVersion, oldCommit := gitVersion, gitCommit
	t.Cleanup(func() { gitVersion, gitCommit = oldVersion, oldCommit })
	gitVersion, gitCommit = "", ""
	if v, c := version(), commit(); v == "" || c == "" {
		t.Errorf("unstamped: version %q, commit %q; want a fallback for both", v, c)
	}
	gitVersion, gitCommit = "v0.9.0+git.abc1234", "abc1234abc1234abc1234abc1234abc1234abc12"
	if got, want := versionLine(), "book-controller v0.9.0+git.abc1234 (commit abc1234abc1234abc1234abc1234abc1234abc12, built with "+runtime.Version()+")"; got != want {
		t.Errorf("versionLine() = %q, want %q", got, want)
	}
}
