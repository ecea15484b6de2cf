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
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"ydzs.io/book-controller/test/integration/framework"
)

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	// 10 observations ≤ 1, 10 more in (1, 2], 80 in (2, 4], none above.
	bs := []bucket{{1, 10}, {2, 20}, {4, 100}, {inf, 100}}
	for _, c := range []struct {
		q, want float64
	}{
		{0, 0},
		{0.05, 0.5},   // rank 5 of the 10 in [0, 1]
		{0.1, 1},      // the first bucket's top
		{0.15, 1.5},   // rank 15: half-way through (1, 2]
		{0.6, 3},      // rank 60: half-way through the 80 of (2, 4]
		{0.99, 3.975}, // rank 99: 79 of the 80 through (2, 4]
		{1, 4},
	} {
		if got := histogramQuantile(c.q, bs); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("q %g: %g, want %g", c.q, got, c.want)
		}
	}
	// A rank in +Inf gives the highest finite bound, as Prometheus does.
	if got := histogramQuantile(0.99, []bucket{{1, 1}, {inf, 100}}); got != 1 {
		t.Errorf("rank in +Inf: %g, want 1", got)
	}
	// No observation, or no buckets: NaN.
	for _, bs := range [][]bucket{nil, {{1, 0}, {inf, 0}}} {
		if got := histogramQuantile(0.5, bs); !math.IsNaN(got) {
			t.Errorf("%v: %g, want NaN", bs, got)
		}
	}
	// Empty buckets below the rank are skipped, not interpolated through.
	if got := histogramQuantile(0.5, []bucket{{1, 0}, {2, 0}, {4, 2}, {inf, 2}}); got != 3 {
		t.Errorf("after empty buckets: %g, want 3", got)
	}
}

func TestHistogramDeltaFromScrapes(t *testing.T) {
	h := func(count uint64, sum float64, cum ...uint64) metrics {
		var bs []*dto.Bucket
		for i, c := range cum {
			bs = append(bs, &dto.Bucket{UpperBound: ptr([]float64{0.001, 0.01}[i]), CumulativeCount: ptr(c)})
		}
		return metrics{reviewDurationMetric: {Metric: []*dto.Metric{{Histogram: &dto.Histogram{
			SampleCount: ptr(count), SampleSum: ptr(sum), Bucket: bs}}}}}
	}
	before := h(10, 0.05, 5, 10)
	after := h(30, 0.25, 15, 28)
	b0, s0 := histogramOf(before, reviewDurationMetric)
	b1, s1 := histogramOf(after, reviewDurationMetric)
	d := subtractBuckets(b1, b0)
	want := []bucket{{0.001, 10}, {0.01, 18}, {math.Inf(1), 20}}
	if len(d) != len(want) {
		t.Fatalf("delta %v, want %v", d, want)
	}
	for i := range want {
		if d[i] != want[i] {
			t.Errorf("delta %v, want %v", d, want)
			break
		}
	}
	if got := s1 - s0; math.Abs(got-0.2) > 1e-9 {
		t.Errorf("sum increase %g, want 0.2", got)
	}
	// Before the first review the histogram may be missing: all of after.
	if d := subtractBuckets(b1, nil); d[len(d)-1].Count != 30 {
		t.Errorf("from nothing: %v", d)
	}
	w := webhookDelta(before, after)
	if w.Reviews != 20 || math.Abs(w.MeanMs-10) > 1e-9 {
		t.Errorf("webhookDelta: %+v, want 20 reviews, mean 10 ms", w)
	}
	if w := webhookDelta(before, before); w.Reviews != 0 || w.P50Ms != 0 || w.P99Ms != 0 {
		t.Errorf("no review: %+v, want zeros (JSON has no NaN)", w)
	}
}

func conversionFixture() *ConversionResult {
	r := &ConversionResult{modeRun: modeRun{Started: "2026-12-06T01:00:00Z", Command: "go run . -conversion -n 1000 -rounds 2", N: 1000,
		Namespaces: 4, Machine: Machine{Cores: 2, CPU: "test CPU", LoadAvgStart: "0.1 0.2 0.3"}, Cluster: "local"},
		PageSize: 500, Rounds: 2, WatchCache: true, CreateSeconds: 3.5}
	for rd := 1; rd <= 2; rd++ {
		r.Lists = append(r.Lists,
			&ListRun{Round: rd, Version: "v2", Seconds: 1 + float64(rd)/10, Pages: 2, Items: 1000, CPUSeconds: map[string]float64{"kube-apiserver": 0.5}},
			&ListRun{Round: rd, Version: "v1", Seconds: 2 + float64(rd)/10, Pages: 2, Items: 1000, CPUSeconds: map[string]float64{"kube-apiserver": 1, "controller": 0.4}})
	}
	return r
}

func TestConversionSummaryAndReport(t *testing.T) {
	r := conversionFixture()
	r.summarize(metrics{}, metrics{})
	if r.V2.P50Seconds != 1.15 || r.V1.P50Seconds != 2.15 || r.V1.MaxSeconds != 2.2 || r.V1.PagesEach != 2 {
		t.Errorf("list stats v2 %+v, v1 %+v", r.V2, r.V1)
	}
	// (2.15 − 1.15) s over 2 pages.
	if r.ClientPerReviewMs != 500 {
		t.Errorf("client per review %g ms, want 500", r.ClientPerReviewMs)
	}
	if r.Webhook.V1Pages != 4 || r.Webhook.V1Books != 2000 {
		t.Errorf("v1 pages %d, Books %d; want 4 and 2000", r.Webhook.V1Pages, r.Webhook.V1Books)
	}
	// No review during the creates: the watch-cache check fails.
	if len(r.Checks) != 2 || !strings.HasPrefix(r.Checks[0], "PASS") || !strings.HasPrefix(r.Checks[1], "FAIL") {
		t.Errorf("checks %q", r.Checks)
	}
	md := conversionMarkdown(r)
	for _, want := range []string{
		"    make bench-conversion CONV_N=1000 CONV_ROUNDS=2\n    cd test/bench && go run . -conversion -n 1000 -rounds 2\n",
		"| list time, p50 | 1.150 s | 2.150 s | **1.87** |",
		"| list time, max | 1.200 s | 2.200 s | 1.83 |",
		"| kube-apiserver CPU per list (median) | 0.50 s | 1.00 s | 2.00 |",
		"| p50 per review, interpolated in the buckets | – | – |",
		"**500.00 ms** per page.",
		"| 2 | v1 | 2.200 | 2 | 1000 | 1.00 | 0.00 | 0.40 | 0.00 |",
		"a watch cache for Books",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	r.WatchCache = false
	if md := conversionMarkdown(r); !strings.Contains(md, "BENCH_FLAGS='-conversion-watch-cache=false -label no-watch-cache'") ||
		!strings.Contains(md, "without a watch cache for Books") {
		t.Errorf("the report without the watch cache does not say so:\n%s", md)
	}
}

func TestConversionChecks(t *testing.T) {
	r := &ConversionResult{modeRun: modeRun{N: 100}, WatchCache: true,
		Creates: WebhookStats{Results: map[string]float64{"success": 100}},
		Webhook: WebhookStats{V1Pages: 4, V1Books: 400, Results: map[string]float64{"success": 0}}}
	for _, c := range conversionChecks(r) {
		if !strings.HasPrefix(c, "PASS") {
			t.Errorf("with the cache, a review per Book created: %q", c)
		}
	}
	r.WatchCache = false
	if c := conversionChecks(r); !strings.HasPrefix(c[1], "FAIL") {
		t.Errorf("without the cache, no review during the v1 lists must fail: %q", c)
	}
	r.Webhook.Results["success"] = 400
	r.FailuresTotal = 1
	if c := conversionChecks(r); !strings.HasPrefix(c[0], "FAIL") || !strings.HasPrefix(c[1], "PASS") {
		t.Errorf("a failed review must fail, 400 reviews for 4 pages pass: %q", c)
	}
}

func TestRatioAndCells(t *testing.T) {
	if ratio(3, 2) != 1.5 || ratio(1, 0) != 0 {
		t.Errorf("ratio: %g, %g", ratio(3, 2), ratio(1, 0))
	}
	if ratioCell(1, 0) != "–" || ratioCell(2.5, 1) != "2.50" {
		t.Errorf("ratioCell: %q, %q", ratioCell(1, 0), ratioCell(2.5, 1))
	}
	if msCell(math.NaN()) != "–" || msCell(1.234) != "1.23 ms" {
		t.Errorf("msCell: %q, %q", msCell(math.NaN()), msCell(1.234))
	}
	out := filepath.Join(framework.RepoRoot(), "docs", "bench")
	if got := runCommand([]string{"-conversion", "-out", out, "-kubeconfig", "", "-label", "a b"}); got != "go run . -conversion -out ../../docs/bench -kubeconfig '' -label 'a b'" {
		t.Errorf("runCommand: %s", got)
	}
}

func ptr[T any](v T) *T { return &v }

// The report of a saved run is written again from its JSON, with the notes
// added to it by hand.
func TestConversionRereport(t *testing.T) {
	r := conversionFixture()
	r.summarize(metrics{}, metrics{})
	first := t.TempDir()
	if err := writeConversion(options{out: first, label: defaultLabel}, r); err != nil {
		t.Fatal(err)
	}
	r.Showed = []string{"a note written after the run"}
	if err := writeJSON(filepath.Join(first, "conversion.json"), r); err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if err := rereportConversion(options{out: again, label: "x", report: filepath.Join(first, "conversion.json")}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(again, "conversion-x.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := conversionMarkdown(r); string(md) != want || !strings.HasSuffix(want, "## What this run showed\n\n- a note written after the run\n") {
		t.Errorf("report written again:\n%s\nwant:\n%s", md, want)
	}
	if err := rereportConversion(options{out: again, report: filepath.Join(first, "missing.json")}); err == nil {
		t.Error("a missing JSON: no error")
	}
}
