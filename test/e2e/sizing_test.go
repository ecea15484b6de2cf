//go:build e2e && linux

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

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sizing is what testOOM measures of the controller's memory in its pods.
// With E2E_SIZING_OUT set to a path without extension (make test-e2e
// E2E_SIZING_OUT=docs/bench/sizing-<date>), it is written there as .json
// and .md: the report docs/deploy.md's sizing cites.
type sizing struct {
	Date    string `json:"date"`
	Cores   int    `json:"cores"`
	LoadAvg string `json:"loadAverageAtEnd"`
	Books   int    `json:"books"`
	// Each figure is per replica, in MiB, in the order the pods were read.
	IdleRSS  []float64 `json:"idleRSSMiB"`
	IdleAnon []float64 `json:"idleAnonymousMiB"`
	RSS      []float64 `json:"rssMiB"`
	Anon     []float64 `json:"anonymousMiB"`
	// PerTenThousand is the larger replica's growth per 10,000 Books.
	PerTenThousand     float64 `json:"rssPerTenThousandBooksMiB"`
	PerTenThousandAnon float64 `json:"anonymousPerTenThousandBooksMiB"`
	// OOMLimit is the limit that got the pod OOM-killed; PeakAtStart the
	// peak RSS of the pods that then started over Books+100 Books.
	OOMLimit    string    `json:"oomKilledAtLimit"`
	PeakAtStart []float64 `json:"peakRSSAtStartMiB"`
}

// write writes the report when E2E_SIZING_OUT asks for it.
func (s sizing) write(t *testing.T) {
	t.Helper()
	out := os.Getenv("E2E_SIZING_OUT")
	if out == "" {
		return
	}
	s.Date, s.Cores = time.Now().UTC().Format(time.RFC3339), runtime.NumCPU()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		s.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out+".json", append(js, '\n'), 0o644); err != nil {
		t.Fatalf("E2E_SIZING_OUT: %v", err)
	}
	if err := os.WriteFile(out+".md", []byte(s.markdown()), 0o644); err != nil {
		t.Fatalf("E2E_SIZING_OUT: %v", err)
	}
	t.Logf("wrote %s.{md,json}", out)
}

func (s sizing) markdown() string {
	f := func(v []float64) string {
		var out []string
		for _, x := range v {
			out = append(out, fmt.Sprintf("%.0f", x))
		}
		return strings.Join(out, ", ") + " MiB"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# The controller's memory in its pods, `make test-e2e`, %s\n\n", s.Date)
	fmt.Fprintf(&b, "%d cores, load average at the end %s. Two replicas of `manifests/` with leader election on the local node, 500m CPU requested; figures per replica, from `/proc/<pid>/status` (test/e2e, `testOOM`).\n\n", s.Cores, s.LoadAvg)
	fmt.Fprintln(&b, "| Figure | Value |\n|---|--:|")
	fmt.Fprintf(&b, "| RSS with no Books of the test | %s |\n", f(s.IdleRSS))
	fmt.Fprintf(&b, "| anonymous memory with no Books of the test | %s |\n", f(s.IdleAnon))
	fmt.Fprintf(&b, "| RSS with %d Books | %s |\n", s.Books, f(s.RSS))
	fmt.Fprintf(&b, "| anonymous memory with %d Books | %s |\n", s.Books, f(s.Anon))
	fmt.Fprintf(&b, "| growth per 10,000 Books (the larger replica): RSS, anonymous | %.0f, %.0f MiB |\n", s.PerTenThousand, s.PerTenThousandAnon)
	fmt.Fprintf(&b, "| the limit that got the pod OOM-killed | %s |\n", s.OOMLimit)
	fmt.Fprintf(&b, "| peak RSS of the pods starting over %d Books | %s |\n", s.Books+100, f(s.PeakAtStart))
	return b.String()
}
