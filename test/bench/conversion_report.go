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
	"math"
	"slices"
	"strings"

	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/test/integration/framework"
)

// bucket is one cumulative bucket of a Prometheus histogram: Count
// observations were at most UpperBound (+Inf for the last).
type bucket struct {
	UpperBound float64
	Count      float64
}

// histogramOf returns the buckets of the histogram name, the +Inf bucket
// last (its count is the histogram's), and its sum; nil when it is not
// exported. Several series are added up.
func histogramOf(m metrics, name string) ([]bucket, float64) {
	var out []bucket
	var sum float64
	for _, s := range m[name].GetMetric() {
		h := s.GetHistogram()
		if h == nil {
			continue
		}
		bs := make([]bucket, 0, len(h.GetBucket())+1)
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				bs = append(bs, bucket{b.GetUpperBound(), float64(b.GetCumulativeCount())})
			}
		}
		bs = append(bs, bucket{math.Inf(1), float64(h.GetSampleCount())})
		sum += h.GetSampleSum()
		if out == nil {
			out = bs
			continue
		}
		for i := range out {
			if i < len(bs) {
				out[i].Count += bs[i].Count
			}
		}
	}
	return out, sum
}

// subtractBuckets is after − before, bucket by bucket: the observations
// made between two scrapes. before may be nil (nothing observed yet).
func subtractBuckets(after, before []bucket) []bucket {
	out := slices.Clone(after)
	for i := range out {
		if i < len(before) && before[i].UpperBound == out[i].UpperBound {
			out[i].Count -= before[i].Count
		}
	}
	return out
}

// histogramQuantile is the q-quantile (0 ≤ q ≤ 1) of cumulative buckets,
// as Prometheus' histogram_quantile computes it: the bucket that holds the
// rank q × count, and within it linear interpolation from its lower bound
// (0 for the first bucket) to its upper bound. A rank in the +Inf bucket
// gives the highest finite bound. NaN when there is no observation.
func histogramQuantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].Count <= 0 || q < 0 || q > 1 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].Count
	i, _ := slices.BinarySearchFunc(bs, rank, func(b bucket, r float64) int {
		switch {
		case b.Count < r:
			return -1
		case b.Count > r:
			return 1
		}
		return 0
	})
	// BinarySearch finds the first bucket whose count is ≥ rank.
	if i >= len(bs) {
		i = len(bs) - 1
	}
	if math.IsInf(bs[i].UpperBound, 1) {
		if len(bs) < 2 {
			return math.NaN()
		}
		return bs[len(bs)-2].UpperBound
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bs[i-1].UpperBound, bs[i-1].Count
	}
	in := bs[i].Count - below
	if in <= 0 {
		return bs[i].UpperBound
	}
	return lower + (bs[i].UpperBound-lower)*(rank-below)/in
}

// by returns the samples of name summed by the value of label.
func (m metrics) by(name, label string) map[string]float64 {
	return framework.MetricSumBy(m, name, label)
}

// msCell formats milliseconds, "–" for what was not measured.
func msCell(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.2f ms", v)
}

// ratioCell is a/b for a table: "–" when b is 0.
func ratioCell(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", ratio(a, b))
}

func conversionMarkdown(r *ConversionResult) string {
	var b strings.Builder
	b.WriteString("# The price of conversion: Books stored as v2, read as v1 through the webhook\n\n")
	flags := ""
	if !r.WatchCache {
		flags = " BENCH_FLAGS='-conversion-watch-cache=false -label no-watch-cache'"
	}
	fmt.Fprintf(&b, "    make bench-conversion CONV_N=%d CONV_ROUNDS=%d%s\n    cd test/bench && %s\n\n", r.N, r.Rounds, flags, r.Command)
	fmt.Fprintf(&b, "Measured %s on %d cores (%s), %s of memory, load average %s at the start; %s. ",
		r.Started, r.Machine.Cores, r.Machine.CPU, mib(r.Machine.MemoryBytes), r.Machine.LoadAvgStart, r.Cluster)
	if r.WatchCache {
		b.WriteString("The API server ran with its defaults: a watch cache for Books, one per served version. ")
	} else {
		b.WriteString("The API server ran **without a watch cache for Books** (`--watch-cache-sizes=books.webapp.ydzs.io#0`): every list reads etcd. ")
	}
	fmt.Fprintf(&b, "The Book CRD is manifests/crd.yaml (v2 stored, v1 served through the conversion webhook); "+
		"the controller binary serves the webhook on 127.0.0.1 (`--webhook-loopback`), confined with `--namespace` to a namespace without Books, "+
		"so that the reviews it answers are the bench's alone. %d Books were created as v2 over %d namespaces in %.1f s "+
		"(half a whole amount of XXX, which v1 says exactly; half an amount in EUR with cents and two authors, which v1 carries in the stash annotation). "+
		"Then every Book was listed %d times as each version, in pages of %d, the versions alternating and the first of each pair swapped every round, "+
		"after one unmeasured list of each.\n\n", r.N, r.Namespaces, r.CreateSeconds, r.Rounds, r.PageSize)
	if r.LoadAvgLists[0] != "" {
		fmt.Fprintf(&b, "Before the measured lists other work kept %.2f of the %d cores busy; load average %s before them, %s after.\n\n",
			r.BusyBeforeLists, r.Machine.Cores, r.LoadAvgLists[0], r.LoadAvgLists[1])
	}

	b.WriteString("## Lists\n\n")
	b.WriteString("| | v2 (the storage version) | v1 (converted) | v1 / v2 |\n|---|--:|--:|--:|\n")
	fmt.Fprintf(&b, "| lists measured | %d | %d | |\n", r.V2.Lists, r.V1.Lists)
	fmt.Fprintf(&b, "| pages per list | %d | %d | |\n", r.V2.PagesEach, r.V1.PagesEach)
	fmt.Fprintf(&b, "| list time, p50 | %.3f s | %.3f s | **%s** |\n", r.V2.P50Seconds, r.V1.P50Seconds, ratioCell(r.V1.P50Seconds, r.V2.P50Seconds))
	fmt.Fprintf(&b, "| list time, max | %.3f s | %.3f s | %s |\n", r.V2.MaxSeconds, r.V1.MaxSeconds, ratioCell(r.V1.MaxSeconds, r.V2.MaxSeconds))
	fmt.Fprintf(&b, "| kube-apiserver CPU per list (median) | %.2f s | %.2f s | %s |\n", r.V2.APIServerCPUSeconds, r.V1.APIServerCPUSeconds,
		ratioCell(r.V1.APIServerCPUSeconds, r.V2.APIServerCPUSeconds))
	fmt.Fprintf(&b, "| controller CPU per list (the webhook; median) | %.2f s | %.2f s | |\n\n", r.V2.WebhookCPUSeconds, r.V1.WebhookCPUSeconds)

	b.WriteString("## The webhook\n\n| | during the creates | during the measured lists |\n|---|--:|--:|\n")
	c, l := r.Creates, r.Webhook
	fmt.Fprintf(&b, "| what the bench did | %d Books created as v2 | %d pages, %d Books listed as v1 (and as many as v2) |\n", r.N, l.V1Pages, l.V1Books)
	fmt.Fprintf(&b, "| ConversionReviews (the histogram's count) | %g | %g |\n", c.Reviews, l.Reviews)
	fmt.Fprintf(&b, "| reviews per Book | %s | %s |\n", ratioCell(c.Reviews, float64(r.N)), ratioCell(l.Reviews, float64(l.V1Books)))
	fmt.Fprintf(&b, "| p50 per review, interpolated in the buckets | %s | %s |\n", msOf(c), msOf(l, "p50"))
	fmt.Fprintf(&b, "| p99 per review, interpolated in the buckets | %s | %s |\n", msOf(c, "p99"), msOf(l, "p99"))
	fmt.Fprintf(&b, "| mean per review (the histogram's sum ÷ count) | %s | %s |\n", msOf(c, "mean"), msOf(l, "mean"))
	fmt.Fprintf(&b, "| by result | %s | %s |\n", resultsCell(c.Results), resultsCell(l.Results))
	fmt.Fprintf(&b, "\nAs the client sees it, (v1 p50 − v2 p50) ÷ %d pages = **%s** per page%s. Reviews not answered with success over the whole run: %g.\n\n",
		r.V1.PagesEach, msCell(r.ClientPerReviewMs), perBookNote(r), r.FailuresTotal)
	if l.Reviews == 0 && l.V1Pages > 0 {
		b.WriteString("No review during the measured lists: the v1 watch cache holds every Book converted already, so what a v1 list costs more is not the webhook's " +
			"but the v1 form's bytes (half the Books carry the stash annotation) and the noise of a shared machine.\n\n")
	}
	for _, ck := range r.Checks {
		fmt.Fprintf(&b, "- %s\n", ck)
	}

	b.WriteString("\n## Every list\n\n| round | version | seconds | pages | Books | kube-apiserver CPU s | etcd CPU s | controller CPU s | bench CPU s |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, li := range r.Lists {
		cpu := li.CPUSeconds
		fmt.Fprintf(&b, "| %d | %s | %.3f | %d | %d | %.2f | %.2f | %.2f | %.2f |\n", li.Round, li.Version, li.Seconds, li.Pages, li.Items,
			cpu[localcluster.KubeAPIServer], cpu[localcluster.Etcd], cpu["controller"], cpu["bench"])
	}
	b.WriteString(conversionMeaning)
	b.WriteString(showedSection(r.Showed))
	return b.String()
}

// showedSection is the report's last section, what the run showed (the
// notes written into its JSON by hand); empty without notes.
func showedSection(showed []string) string {
	if len(showed) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## What this run showed\n\n")
	for _, s := range showed {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	return b.String()
}

// conversionMeaning explains the report's figures.
const conversionMeaning = `
## What each figure means

- **Where the reviews go.** kube-apiserver keeps a watch cache per served version of a custom
  resource, each decoding what etcd holds into its version one object at a time. The v1 cache
  converts each Book once, when its write reaches it, in a ConversionReview of one object;
  a list served from the cache (kubectl's and the informers' first list: resourceVersion ""
  or "0", paged with limit and continue) converts nothing, whatever its version. Without
  the cache every list reads etcd and converts each Book it returns, again one review per
  object, not one per page.
- **List time** is one client's wall time to read every Book: the first page's request to
  the last page decoded into the version's Go types, each page asking for the next with the
  continue token (limit), as informers and kubectl page. **v1 / v2** is the price of
  conversion for a reader; compare it, not the seconds, with other runs: the machine is
  shared, and the API server, etcd, the controller and the bench compete for its cores.
- **CPU per list** is each process's user + system time over the list (/proc/<pid>/stat);
  the controller's is the webhook's work (its informers watch a namespace without Books).
- **p50 and p99 per review** come from the controller's
  book_controller_conversion_review_duration_seconds, scraped before and after the creates
  and the measured lists: the increase of each bucket, interpolated linearly within the
  bucket that holds the rank (Prometheus' histogram_quantile), so only as fine as the
  buckets (0.1, 0.25, 0.5, 1, 2.5, 5 ms …). The mean is exact. It is the webhook's time,
  from the review's arrival to its answer: it leaves out TLS, the API server's encoding of
  the review and decoding of the answer, which the client's figure includes.
- **As the client sees it** is what conversion adds to a page: the v1 list's p50 minus the
  v2 list's, over the pages of one list.
- **Checks**: book_controller_conversion_reviews_total counts no result but success over the
  whole run; with the watch cache, at least one review per Book created (the v1 cache's);
  without it, at least one review per page listed as v1.
`

// msOf is one of w's per-review figures ("p50" unless said), "–" without
// reviews.
func msOf(w WebhookStats, which ...string) string {
	if w.Reviews == 0 {
		return "–"
	}
	switch append(which, "p50")[0] {
	case "p99":
		return msCell(w.P99Ms)
	case "mean":
		return msCell(w.MeanMs)
	}
	return msCell(w.P50Ms)
}

// perBookNote is the client's figure per Book converted, when the lists
// converted each Book (without the watch cache).
func perBookNote(r *ConversionResult) string {
	if r.Webhook.Reviews == 0 || r.V1.PagesEach == 0 || r.N == 0 {
		return ""
	}
	return fmt.Sprintf(", %s per Book", msCell(r.ClientPerReviewMs*float64(r.V1.PagesEach)/float64(r.N)))
}

// resultsCell is the counter's increase by result, "success 40, failure 0, …".
func resultsCell(m map[string]float64) string {
	var out []string
	for _, k := range sortedKeysOf(m) {
		out = append(out, fmt.Sprintf("%s %g", k, m[k]))
	}
	return strings.Join(out, ", ")
}

func sortedKeysOf(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
