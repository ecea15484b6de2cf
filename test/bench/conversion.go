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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/pkg/webhook"
	"ydzs.io/book-controller/test/integration/framework"
)

// The price of conversion (-conversion, `make bench-conversion`): the Book
// CRD of manifests/crd.yaml (v2 stored, v1 served through the conversion
// webhook), the controller binary serving that webhook on 127.0.0.1
// (--webhook-loopback), N Books created as v2, then every Book listed in
// pages, as v2 and as v1, alternately, -rounds times each. It reports each
// version's list time, their ratio, the reviews the webhook answered during
// the creates and during the lists, and its time per review from the
// controller's histogram and as the client sees it.
//
// Where the reviews go: kube-apiserver keeps a watch cache per served
// version of a custom resource, each decoding what etcd holds into its own
// version, one object at a time (apiextensions-apiserver's
// customresource_handler.go: a storage per version, decoderVersion the
// version). So the v1 cache converts each Book once, when its write reaches
// it, in a review of one object; lists served from the cache (kubectl's and
// the informers', with resourceVersion "" or "0") convert nothing. With the
// cache off (-conversion-watch-cache=false) every list reads etcd and
// converts each Book it returns, again in a review of one object.

// Metric names of pkg/webhook, read from the controller's /metrics.
const (
	reviewsMetric        = "book_controller_conversion_reviews_total"
	objectsMetric        = "book_controller_conversion_objects_total"
	reviewDurationMetric = "book_controller_conversion_review_duration_seconds"
)

// conversionControllerNS is the namespace the controller is confined to
// (--namespace): it holds no Book, so the controller's informers, which read
// v1, convert nothing and the reviews counted are the lists' alone.
const conversionControllerNS = "conversion-controller"

// ConversionResult is what a conversion run measured; written as JSON.
type ConversionResult struct {
	modeRun
	PageSize int `json:"pageSize"`
	Rounds   int `json:"rounds"`
	// ControllerArgs is the controller's command line.
	ControllerArgs []string `json:"controllerArgs"`
	CreateSeconds  float64  `json:"createSeconds"`
	// BusyBeforeLists is how many cores other work kept busy just before
	// the measured lists (they start after 2 minutes at most, busy or
	// not); LoadAvgLists the load average before and after them.
	BusyBeforeLists float64   `json:"busyBeforeLists"`
	LoadAvgLists    [2]string `json:"loadAvgLists"`
	// Lists are every measured list, in the order they ran.
	Lists []*ListRun `json:"lists"`
	V2    ListStats  `json:"v2"`
	V1    ListStats  `json:"v1"`
	// WatchCache is false when the API server ran without a watch cache
	// for Books (-conversion-watch-cache=false).
	WatchCache bool `json:"watchCache"`
	// Creates is the webhook's account of the N creates, Webhook of the
	// measured lists: the histogram's and the counter's increase over them.
	Creates WebhookStats `json:"creates"`
	Webhook WebhookStats `json:"listReviews"`
	// FailuresTotal counts every review not answered with success over the
	// whole run (readiness and the unmeasured lists included).
	FailuresTotal float64 `json:"failuresTotal"`
	// ClientPerReviewMs is (v1 p50 − v2 p50) ÷ the pages of one list: what
	// a review adds to a page, as the client sees it.
	ClientPerReviewMs float64 `json:"clientPerReviewMs"`
}

// modeRun is what a run of a mode of its own (-conversion, -migration)
// records besides its figures.
type modeRun struct {
	Started    string  `json:"started"`
	Finished   string  `json:"finished,omitempty"`
	Command    string  `json:"command"`
	Machine    Machine `json:"machine"`
	Cluster    string  `json:"cluster"`
	N          int     `json:"n"`
	Namespaces int     `json:"namespaces"`
	// Checks are the run's checks, each "PASS: …" or "FAIL: …".
	Checks []string `json:"checks"`
	// Showed is what the run showed, written by hand after it into the
	// JSON; -report prints it at the end of the report.
	Showed []string `json:"showed,omitempty"`
}

// ListRun is one paged list of every Book in one version.
type ListRun struct {
	Round   int     `json:"round"`
	Version string  `json:"version"`
	Seconds float64 `json:"seconds"`
	Pages   int     `json:"pages"`
	Items   int     `json:"items"`
	// CPUSeconds is each process's CPU time over the list: kube-apiserver,
	// etcd, kube-controller-manager, the bench (client) and the controller
	// (the webhook).
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
}

// ListStats sums up the lists of one version.
type ListStats struct {
	Lists      int     `json:"lists"`
	PagesEach  int     `json:"pagesEach"`
	P50Seconds float64 `json:"p50Seconds"`
	MaxSeconds float64 `json:"maxSeconds"`
	// APIServerCPUSeconds and WebhookCPUSeconds are medians per list.
	APIServerCPUSeconds float64 `json:"apiServerCPUSeconds"`
	WebhookCPUSeconds   float64 `json:"webhookCPUSeconds"`
}

// WebhookStats is the webhook's own account of a stretch of the run: the
// increase of its histogram and counter between two scrapes.
type WebhookStats struct {
	Reviews float64            `json:"reviews"` // the histogram's count
	P50Ms   float64            `json:"p50Ms"`   // interpolated in its buckets
	P99Ms   float64            `json:"p99Ms"`   // interpolated in its buckets
	MeanMs  float64            `json:"meanMs"`  // its sum ÷ its count: exact
	Results map[string]float64 `json:"results"` // the counter's increase by result
	// ObjectsTo is the Books converted, by the version converted to (the
	// objects counter's increase).
	ObjectsTo map[string]float64 `json:"objectsTo,omitempty"`
	// V1Pages and V1Books are what the measured v1 lists read (lists only).
	V1Pages int `json:"v1Pages,omitempty"`
	V1Books int `json:"v1Books,omitempty"`
}

func (e *env) runConversion(ctx context.Context) (err error) {
	o := e.o
	res := &ConversionResult{modeRun: e.modeRun(), PageSize: o.pageSize, Rounds: o.rounds, WatchCache: o.convWatchCache}
	defer func() {
		if res.Finished == "" {
			return // not measured to the end: an earlier report stays
		}
		if werr := writeConversion(o, res); werr != nil {
			err = errors.Join(err, fmt.Errorf("writing the report: %w", werr))
		}
	}()
	namespaces := benchNamespaces("conversion", o.convNamespaces)
	for _, ns := range append([]string{conversionControllerNS}, namespaces...) {
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	pr, err := e.startWebhook(ctx, res)
	if err != nil {
		return err
	}
	defer pr.terminate()
	if err := e.createConversionBooks(ctx, pr, res, namespaces); err != nil {
		return err
	}
	before, after, err := e.measureLists(ctx, pr, res)
	if err != nil {
		return err
	}
	res.Finished = time.Now().UTC().Format(time.RFC3339)
	res.summarize(before, after)
	for _, c := range res.Checks {
		logf("%s", c)
	}
	if slices.ContainsFunc(res.Checks, func(c string) bool { return strings.HasPrefix(c, "FAIL") }) {
		return errors.New("a check failed (see the report)")
	}
	return nil
}

// createConversionBooks creates the N Books as v2, so that each is stored
// as v2, spread over the namespaces, and records the reviews they cost.
func (e *env) createConversionBooks(ctx context.Context, pr *proc, res *ConversionResult, namespaces []string) error {
	o := e.o
	logf("creating %d Books as v2 over %d namespaces", o.n, len(namespaces))
	beforeCreates, err := scrape(pr.metricsAddr)
	if err != nil {
		return err
	}
	t := time.Now()
	if _, err := work(ctx, o.n, o.preCreateConcy, 0, func(i int) error {
		return e.createV2Book(ctx, namespaces[i%len(namespaces)], i)
	}); err != nil {
		return fmt.Errorf("creating Books: %w", err)
	}
	res.CreateSeconds = round3(time.Since(t).Seconds())
	logf("created %d Books in %.1f s", o.n, res.CreateSeconds)
	// The v1 watch cache converts what reaches it after the write: wait
	// until the reviews stop, with a bound.
	var afterCreates metrics
	_ = poll.Until(ctx, "the reviews of the creates to stop", time.Second, 2*time.Minute, poll.Unchanged(3*time.Second, func() float64 {
		if m, err := scrape(pr.metricsAddr); err == nil {
			afterCreates = m
		}
		return afterCreates.value(reviewsMetric)
	}))
	if afterCreates == nil {
		return fmt.Errorf("scraping the controller's metrics after the creates failed")
	}
	res.Creates = webhookDelta(beforeCreates, afterCreates)
	logf("reviews during the creates: %g (p50 %.2f ms, p99 %.2f ms)", res.Creates.Reviews, res.Creates.P50Ms, res.Creates.P99Ms)
	return nil
}

// measureLists lists every Book -rounds times as each version, after one
// unmeasured list of each, and returns the controller's metrics before and
// after the measured lists.
func (e *env) measureLists(ctx context.Context, pr *proc, res *ConversionResult) (before, after metrics, err error) {
	// The first list after the creates meets colder caches than the rest.
	for _, v := range []string{"v2", "v1"} {
		if _, err := e.timedList(ctx, pr, 0, v); err != nil {
			return nil, nil, err
		}
	}
	busy, _ := waitQuiet(ctx, e.o.maxBusy)
	res.BusyBeforeLists, res.LoadAvgLists[0] = round(busy, 2), loadavg()
	if before, err = scrape(pr.metricsAddr); err != nil {
		return nil, nil, err
	}
	for r := 1; r <= e.o.rounds; r++ {
		// Alternate which version goes first, so that neither always
		// meets the server fresher.
		order := []string{"v2", "v1"}
		if r%2 == 0 {
			order = []string{"v1", "v2"}
		}
		for _, v := range order {
			l, err := e.timedList(ctx, pr, r, v)
			if err != nil {
				return nil, nil, err
			}
			res.Lists = append(res.Lists, l)
			logf("round %d: %s list of %d Books in %d pages: %.3f s", r, v, l.Items, l.Pages, l.Seconds)
		}
	}
	res.LoadAvgLists[1] = loadavg()
	after, err = scrape(pr.metricsAddr)
	return before, after, err
}

// modeRun is the start of a run's record.
func (e *env) modeRun() modeRun {
	return modeRun{Started: time.Now().UTC().Format(time.RFC3339), Command: runCommand(os.Args[1:]),
		Machine: e.res.Machine, Cluster: e.res.Cluster, N: e.o.n, Namespaces: e.o.convNamespaces}
}

// runCommand is the command line of a run of a mode of its own
// (-conversion, -migration), as it would be typed in test/bench: paths in
// the repository relative to it (make passes -out absolute), so that the
// report names no checkout.
func runCommand(args []string) string {
	out := []string{"go", "run", "."}
	root := framework.RepoRoot() + string(os.PathSeparator)
	for _, a := range args {
		if rest, ok := strings.CutPrefix(a, root); ok {
			a = "../../" + rest
		}
		if a == "" || strings.ContainsAny(a, " '\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}

// startWebhook starts the controller with the webhook on 127.0.0.1 and
// waits until the API server converts through it: the CRD's caBundle set
// and a v2 Book read as v1.
func (e *env) startWebhook(ctx context.Context, res *ConversionResult) (*proc, error) {
	d := e.defaults
	spec := controllerSpec{Config: "ours", Name: "book-controller", bin: e.ours,
		args: func(ns, metrics, probe string) []string {
			// Port 0: with --webhook-loopback the controller writes the
			// port it got into the CRD. --storage-migration off: the CRD
			// was created storing v2, so there is nothing to migrate.
			a := []string{"--kubeconfig", e.kubecfg, "--namespace", ns,
				"--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
				"--webhook-bind-address", "127.0.0.1:0", "--webhook-loopback", "--storage-migration=false",
				"--workers", fmt.Sprint(d.workers), "--kube-api-qps", d.qps, "--kube-api-burst", d.burst}
			return append(a, strings.Fields(e.o.ourArgs)...)
		}}
	pr, err := e.startController(spec, conversionControllerNS, "conversion-controller")
	if err != nil {
		return nil, err
	}
	res.ControllerArgs = pr.args
	ok := false
	defer func() {
		if !ok {
			pr.terminate()
		}
	}()
	probeNS := benchNamespaces("conversion", 1)[0]
	probe := newV2Book(probeNS, 1)
	probe.Name = "probe"
	if _, err := e.books.WebappV2().Books(probeNS).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	err = poll.Until(ctx, "the webhook to serve: the CRD's caBundle set and a v1 read converted", 100*time.Millisecond, 2*time.Minute, func(ctx context.Context) error {
		if pr.exited() {
			return poll.Stop(fmt.Errorf("the controller exited (log: %s)", pr.logPath))
		}
		crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, webhook.DefaultCRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := crd.Spec.Conversion; c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil || len(c.Webhook.ClientConfig.CABundle) == 0 {
			return errors.New("no caBundle in the CRD yet")
		}
		_, err = e.books.WebappV1().Books(probeNS).Get(ctx, probe.Name, metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	// The probe goes, so that the lists hold the N Books alone.
	if err := e.books.WebappV2().Books(probeNS).Delete(ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		return nil, err
	}
	ok = true
	logf("the conversion webhook serves (controller log %s)", pr.logPath)
	return pr, nil
}

// newV2Book is Book i as v2: every other one in EUR with cents and two
// authors, which v1 cannot say (its v1 form carries the stash annotation),
// the others a whole amount of XXX, which v1 says exactly.
func newV2Book(ns string, i int) *webappv2.Book {
	spec := webappv2.BookSpec{Title: fmt.Sprintf("Book number %d", i), Price: webappv2.Price{Amount: fmt.Sprint(i % 1000), Currency: "XXX"}}
	if i%2 == 1 {
		spec.Price = webappv2.Price{Amount: fmt.Sprintf("%d.%02d", i%1000, i%100), Currency: "EUR"}
		spec.Authors = []string{"Author A" + fmt.Sprint(i%7), "Author B" + fmt.Sprint(i%11)}
	}
	return &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: bookName(i), Namespace: ns}, Spec: spec}
}

// createV2Book creates Book i, retrying as createBooks does.
func (e *env) createV2Book(ctx context.Context, ns string, i int) error {
	return createRetrying(func() error {
		_, err := e.books.WebappV2().Books(ns).Create(ctx, newV2Book(ns, i), metav1.CreateOptions{})
		return err
	})
}

// createRetrying calls create up to 5 times, 50 ms apart, until it succeeds
// or finds the object there already.
func createRetrying(create func() error) error {
	var err error
	for try := 0; try < 5; try++ {
		if err = create(); err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// timedList lists every Book in version v, in pages of -page-size, as
// informers and kubectl do, decoding each page into the version's Go types,
// and times it; with the CPU each process spent meanwhile.
func (e *env) timedList(ctx context.Context, pr *proc, rnd int, v string) (*ListRun, error) {
	l := &ListRun{Round: rnd, Version: v}
	cpu0 := e.cpCPU()
	ctl0, _ := readProc(pr.pid)
	start := time.Now()
	opts := metav1.ListOptions{Limit: int64(e.o.pageSize)}
	for {
		var cont string
		var n int
		switch v {
		case "v1":
			list, err := e.books.WebappV1().Books("").List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("listing Books as v1: %w", err)
			}
			cont, n = list.Continue, len(list.Items)
		default:
			list, err := e.books.WebappV2().Books("").List(ctx, opts)
			if err != nil {
				return nil, fmt.Errorf("listing Books as v2: %w", err)
			}
			cont, n = list.Continue, len(list.Items)
		}
		l.Pages++
		l.Items += n
		if cont == "" {
			break
		}
		opts.Continue = cont
	}
	l.Seconds = round(time.Since(start).Seconds(), 4)
	ctl1, _ := readProc(pr.pid)
	l.CPUSeconds = map[string]float64{"controller": round(ctl1.CPUSeconds-ctl0.CPUSeconds, 2)}
	for k, x := range e.cpCPU() {
		l.CPUSeconds[k] = round(x-cpu0[k], 2)
	}
	if l.Items != e.o.n {
		return l, fmt.Errorf("a %s list returned %d Books, want %d", v, l.Items, e.o.n)
	}
	return l, nil
}

// summarize computes the figures and checks from the lists and the two
// scrapes of the controller's metrics around them.
func (r *ConversionResult) summarize(before, after metrics) {
	r.V2, r.V1 = listStats(r.Lists, "v2"), listStats(r.Lists, "v1")
	if r.V1.PagesEach > 0 {
		r.ClientPerReviewMs = round((r.V1.P50Seconds-r.V2.P50Seconds)*1000/float64(r.V1.PagesEach), 3)
	}
	r.Webhook = webhookDelta(before, after)
	for _, l := range r.Lists {
		if l.Version == "v1" {
			r.Webhook.V1Pages += l.Pages
			r.Webhook.V1Books += l.Items
		}
	}
	r.FailuresTotal = 0
	for k, x := range after.by(reviewsMetric, "result") {
		if k != webhook.ResultSuccess {
			r.FailuresTotal += x
		}
	}
	r.Checks = conversionChecks(r)
}

// webhookDelta is the webhook's account of what happened between two
// scrapes of the controller's metrics.
func webhookDelta(before, after metrics) WebhookStats {
	var w WebhookStats
	b0, s0 := histogramOf(before, reviewDurationMetric)
	b1, s1 := histogramOf(after, reviewDurationMetric)
	delta := subtractBuckets(b1, b0)
	if len(delta) > 0 {
		w.Reviews = delta[len(delta)-1].Count
	}
	// JSON has no NaN: with no review the quantiles are 0, and the report
	// says 0 reviews.
	w.P50Ms = round(orZero(histogramQuantile(0.5, delta))*1000, 3)
	w.P99Ms = round(orZero(histogramQuantile(0.99, delta))*1000, 3)
	if w.Reviews > 0 {
		w.MeanMs = round((s1-s0)/w.Reviews*1000, 3)
	}
	res0 := before.by(reviewsMetric, "result")
	w.Results = map[string]float64{}
	for k, x := range after.by(reviewsMetric, "result") {
		w.Results[k] = x - res0[k]
	}
	obj0 := before.by(objectsMetric, "to")
	for k, x := range after.by(objectsMetric, "to") {
		if w.ObjectsTo == nil {
			w.ObjectsTo = map[string]float64{}
		}
		w.ObjectsTo[k] = x - obj0[k]
	}
	return w
}

// conversionChecks: no review failed; with the watch cache, every Book
// created was converted for the v1 cache; without it, the measured v1
// lists went through the webhook (a review a page at least; in fact one a
// Book).
func conversionChecks(r *ConversionResult) []string {
	var out []string
	check := func(ok bool, format string, args ...any) {
		out = append(out, passFail(ok)+": "+fmt.Sprintf(format, args...))
	}
	check(r.FailuresTotal == 0, "reviews not answered with success over the whole run: %g (want 0)", r.FailuresTotal)
	if r.WatchCache {
		got := r.Creates.Results[webhook.ResultSuccess]
		check(got >= float64(r.N), "successful reviews during the creates: %g, for %d Books (want one a Book at least: the v1 watch cache's)", got, r.N)
		return out
	}
	got := r.Webhook.Results[webhook.ResultSuccess]
	check(got >= float64(r.Webhook.V1Pages) && r.Webhook.V1Pages > 0, "successful reviews during the measured lists: %g, for %d pages (%d Books) listed as v1 (want one a page at least)",
		got, r.Webhook.V1Pages, r.Webhook.V1Books)
	return out
}

// listStats sums up the lists of version v.
func listStats(lists []*ListRun, v string) ListStats {
	var secs, apiCPU, hookCPU []float64
	s := ListStats{}
	for _, l := range lists {
		if l.Version != v {
			continue
		}
		s.Lists++
		s.PagesEach = max(s.PagesEach, l.Pages)
		secs = append(secs, l.Seconds)
		apiCPU = append(apiCPU, l.CPUSeconds[localcluster.KubeAPIServer])
		hookCPU = append(hookCPU, l.CPUSeconds["controller"])
	}
	if s.Lists == 0 {
		return s
	}
	s.P50Seconds = round(median(secs), 4)
	s.MaxSeconds = slices.Max(secs)
	s.APIServerCPUSeconds = round(median(apiCPU), 2)
	s.WebhookCPUSeconds = round(median(hookCPU), 2)
	return s
}

// orZero is v, or 0 for NaN.
func orZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// ratio is a/b with 3 decimals, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round(a/b, 3)
}

// rereportConversion writes the report of an earlier run's JSON again.
func rereportConversion(o options) error {
	res := &ConversionResult{}
	if err := readReport(o.report, "conversion", res); err != nil {
		return err
	}
	return writeConversion(o, res)
}

// writeConversion writes conversion.json and .md (conversion-<label>.* for
// any -label but the default).
func writeConversion(o options, r *ConversionResult) error {
	return writeModeReport(o, "conversion", r, conversionMarkdown(r))
}

// readReport reads -report's JSON into res, a result of the mode what.
func readReport(path, what string, res interface{ run() *modeRun }) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-report: %w", err)
	}
	if err := json.Unmarshal(b, res); err != nil || res.run().N == 0 {
		return fmt.Errorf("-report %s: not a %s result (%v)", path, what, err)
	}
	return nil
}

// run gives readReport the modeRun of any result that embeds one.
func (m *modeRun) run() *modeRun { return m }

// writeModeReport writes <name>.json (v) and <name>.md (md) under -out,
// <name>-<label>.* for any -label but the default, and prints md.
func writeModeReport(o options, name string, v any, md string) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.label != defaultLabel {
		name += "-" + o.label
	}
	base := o.out + string(os.PathSeparator) + name
	if err := writeJSON(base+".json", v); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	logf("wrote %s.md and %s.json", base, base)
	return nil
}
