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
	"fmt"
	"strconv"
	"strings"
	"time"

	"ydzs.io/book-controller/test/integration/framework"
)

// controllerSpec says how to start one controller configuration in a
// namespace.
type controllerSpec struct {
	Config      string // ours, twin-tuned, twin-same or twin-default
	Name        string // what the tables call it
	Workers     int
	ClientLimit string   // the client-side rate limit it runs with
	env         []string // added to the bench's environment, whose GOGC is removed
	args        func(ns, metrics, probe string) []string
	bin         string
	// ui runs it with --ui-bind-address and one client subscribed to the
	// page's event stream for as long as it runs (startController).
	ui bool
	// pprof: it has --pprof-bind-address (book-controller, v0.5.0 on; the
	// twin has not), for -profile's controller profile.
	pprof bool
}

// controllerDefaults are book-controller's defaults, read from --help, so
// the tuned twin gets the same values without the bench repeating them.
type controllerDefaults struct {
	workers              int
	qps, burst           string
	eventQPS, eventBurst string
}

func readDefaults(bin string) controllerDefaults {
	var out string
	if p, err := framework.Start(bin+" --help", bin, []string{"--help"}, framework.ProcessOptions{}); err == nil {
		if _, err := p.Wait(time.Minute); err != nil {
			_ = p.Kill()
		}
		out = p.Output()
	}
	d := controllerDefaults{workers: 8, qps: "500", burst: "1000", eventQPS: "0", eventBurst: "1"}
	for _, line := range strings.Split(out, "\n") {
		def := ""
		if i := strings.Index(line, "(default "); i >= 0 {
			def = strings.TrimSuffix(strings.TrimSpace(line[i+len("(default "):]), ")")
		}
		switch {
		case def == "":
		case strings.Contains(line, "--workers "):
			fmt.Sscan(def, &d.workers)
		case strings.Contains(line, "--kube-api-qps "):
			d.qps = def
		case strings.Contains(line, "--kube-api-burst "):
			d.burst = def
		case strings.Contains(line, "--event-qps "):
			d.eventQPS = def
		case strings.Contains(line, "--event-burst "):
			d.eventBurst = def
		}
	}
	return d
}

func (e *env) ourController() controllerSpec {
	d := e.defaults
	limit := fmt.Sprintf("%s QPS / %s burst (client-go token bucket)", d.qps, d.burst)
	if strings.HasPrefix(d.qps, "-") {
		limit = "none (--kube-api-qps -1)"
	}
	return controllerSpec{
		Config: "ours", Name: "book-controller", Workers: d.workers, ClientLimit: limit, bin: e.ours, pprof: true,
		args: func(ns, metrics, probe string) []string {
			a := []string{"--kubeconfig", e.kubecfg, "--namespace", ns,
				"--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
				"--workers", strconv.Itoa(d.workers), "--kube-api-qps", d.qps, "--kube-api-burst", d.burst}
			return append(a, strings.Fields(e.o.ourArgs)...)
		},
	}
}

// twinController is the controller-runtime twin in one of three
// configurations:
//   - twin-default: what the kubebuilder scaffold gives (1 worker);
//   - twin-same: the scaffold with as many workers as ours;
//   - twin-tuned: as many workers, our GOGC, and every lever the framework
//     offers that ours pulls (framework.TwinTunedArgs).
//
// Every configuration gets --readyz-cache-sync, so that a live phase starts
// creating Books once the twin's caches have synced, as it does with ours
// (whose /readyz means that). It changes no work the twin does.
func (e *env) twinController(config string) controllerSpec {
	s := controllerSpec{
		Config: config, Name: "controller-runtime twin (" + strings.TrimPrefix(config, "twin-") + ")", bin: e.twin,
		Workers: e.defaults.workers,
		// ctrl.GetConfig (controller-runtime/pkg/client/config, v0.25) sets
		// QPS = -1 when the kubeconfig leaves it 0: no client-side limit.
		ClientLimit: "none (ctrl.GetConfig sets QPS -1)",
	}
	var extra []string
	switch config {
	case "twin-default":
		s.Workers = 1
	case "twin-same":
	case "twin-tuned":
		extra = framework.TwinTunedArgs(e.defaults.eventQPS, e.defaults.eventBurst)
		if e.o.twinTunedArgs != "" {
			extra = strings.Fields(e.o.twinTunedArgs)
		}
		s.env = []string{"GOGC=" + e.o.twinGOGC}
	default:
		panic("unknown twin configuration " + config)
	}
	s.args = func(ns, metrics, probe string) []string {
		a := []string{"--kubeconfig", e.kubecfg, "--namespace", ns,
			"--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probe,
			"--readyz-cache-sync"}
		if config != "twin-default" {
			a = append(a, "--max-concurrent-reconciles", strconv.Itoa(s.Workers))
		}
		if e.o.twinLogInfo {
			a = append(a, "--zap-log-level=info")
		}
		for _, x := range extra {
			if x != "--readyz-cache-sync" {
				a = append(a, x)
			}
		}
		return a
	}
	return s
}

// controller returns the configuration of a phase's controller by name.
func (e *env) controller(config string) controllerSpec {
	switch config {
	case "ours":
		return e.ourController()
	case "ours-fifo":
		// Ours with the live-first order off: keys in arrival order, as
		// client-go's queue hands them out by default.
		s := e.ourController()
		s.Config, s.Name = config, "book-controller (arrival order)"
		args := s.args
		s.args = func(ns, metrics, probe string) []string {
			return append(args(ns, metrics, probe), "--live-first=false")
		}
		return s
	case "ours-ui":
		// What the live view costs: ours with the UI on and a page open.
		s := e.ourController()
		s.Config, s.Name, s.ui = "ours-ui", "book-controller, UI on, one SSE client", true
		return s
	}
	return e.twinController(config)
}
