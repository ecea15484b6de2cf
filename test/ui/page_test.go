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

package ui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestPageFollowsABook is a learner's first visit: the page loads from the
// controller, a Book is created, its spec edited and its ConfigMap edited
// by hand, and the page shows each journey's steps in order, with the
// queue's and the workers' figures moving and no error in the console;
// then the API server stops and the page shows the Reflectors' retries.
// At 390×844 (a phone) nothing is wider than the screen. Every link to a
// source file points into the fork given with --ui-source-url.
func TestPageFollowsABook(t *testing.T) {
	const fork = "https://git.example.test/learner/book-controller/blob/main/"
	ns := env.Namespace(t)
	uiAddr := framework.FreeAddr(t)
	framework.StartProcess(t, "book-controller", binary, "-kubeconfig", env.Cluster.KubeconfigPath(),
		"--namespace", ns, "--leader-elect-namespace", ns,
		"--metrics-bind-address", framework.FreeAddr(t), "--health-probe-bind-address", framework.FreeAddr(t),
		"--ui-bind-address", uiAddr, "--ui-source-url", fork)
	framework.Eventually(t, "the UI to answer", framework.AnswersOK(uiAddr, "/api/snapshot"))
	b := newBrowser(t)
	b.do(t, "load the page", chromedp.Navigate("http://"+uiAddr+"/"), waitLive())
	if wrong := eval[string](t, b, "the source links", fmt.Sprintf(`(() => {
		const links = [...document.querySelectorAll("a[data-path]")];
		if (links.length === 0) return "the page links no source file";
		const wrong = links.find(a => a.href !== %q + a.dataset.path);
		return wrong ? wrong.href + " is not the fork's file" : "";
	})()`, fork)); wrong != "" {
		t.Errorf("--ui-source-url %s: %s", fork, wrong)
	}
	before := figures(t, b)
	if before["leading"] == "" {
		t.Fatalf("the page shows no leadership figure: %v", before)
	}
	// fork:begin v2
	// With crd.yaml, Books convert through no webhook: its box says so.
	if got := eval[string](t, b, "the conversion webhook's box", `document.getElementById("fig-conversion").textContent`); !strings.Contains(got, "not served here") || !strings.Contains(got, "reviews0") {
		t.Errorf("the conversion webhook's box shows %q, want not served here and no review", got)
	}
	// fork:end v2

	ctx := context.Background()
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "travel", "Dune", 10), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(t, "pick the Book", chromedp.SendKeys("#book", ns+"/travel"), chromedp.Click(`#pick button`))
	created := []string{
		"watch event: books add at RV * → enqueued (live)",
		"worker: #* took it after",
		"API write: create configmaps → 201, RV *",
		"API write: update-status books.webapp.ydzs.io → 200, RV *",
		"sync: success",
	}
	waitForSteps(t, b, "the journey of the new Book", created)

	patch := []byte(`{"spec":{"price":{"amount":"12"}}}`)
	if _, err := env.Books.WebappV2().Books(ns).Patch(ctx, "travel", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	edited := append(created, "watch event: books update at RV * → enqueued (live)", "worker: #* took it after",
		"API write: update configmaps → 200, RV *", "API write: update-status books.webapp.ydzs.io → 200, RV *", "sync: success")
	waitForSteps(t, b, "the journey after the edit", edited)

	cmPatch := []byte(`{"data":{"price":"1"}}`)
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "travel", types.MergePatchType, cmPatch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	repaired := append(edited, "watch event: configmaps update at RV * → enqueued (live)", "worker: #* took it after",
		"API write: update configmaps → 200, RV *", "sync: success")
	waitForSteps(t, b, "the journey of the repair", repaired)

	after := figures(t, b)
	for _, f := range []string{"adds", "keys taken", "success"} {
		was := 0.0 // the sync box lists no result before the first sync
		if before[f] != "" {
			was = number(t, before[f])
		}
		if number(t, after[f]) <= was {
			t.Errorf("figure %q did not move: %s before, %s after", f, before[f], after[f])
		}
	}
	b.screenshot(t, "desktop.png")
	checkPhone(t, b, uiAddr)
	checkBackoff(t, b, ns)
	checkAPIServerOutage(t, b)
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Errorf("the console shows errors:\n%s", strings.Join(errs, "\n"))
	}
}

// checkPhone loads the page at 390×844 and checks that no element reaches
// past the right edge.
func checkPhone(t *testing.T, b *browser, uiAddr string) {
	t.Helper()
	b.do(t, "load the page on a phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(3)),
		chromedp.Navigate("http://"+uiAddr+"/"), waitLive())
	overflow := eval[[]string](t, b, "measure the page", `(() => {
			const w = document.documentElement.clientWidth, out = [];
			if (document.documentElement.scrollWidth > w) out.push("document " + document.documentElement.scrollWidth + " > " + w);
			for (const el of document.querySelectorAll("body *")) {
				const r = el.getBoundingClientRect();
				if (r.width > 0 && r.right > w + 0.5) out.push(el.tagName + (el.id ? "#" + el.id : "") + " right " + Math.round(r.right));
			}
			return out;
		})()`)
	if len(overflow) > 0 {
		t.Errorf("at 390×844 these overflow the %dpx screen:\n%s", 390, strings.Join(overflow, "\n"))
	}
	b.screenshot(t, "phone.png")
	b.do(t, "back to the desktop size", chromedp.EmulateViewport(1280, 1000))
}

// checkBackoff fills the namespace's ConfigMap quota, so that a new Book's
// ConfigMap create is refused (pkg/controller/refusal.go), and waits until
// the page shows the refused syncs with their growing backoffs; once the
// quota is gone, the ConfigMap is created.
func checkBackoff(t *testing.T, b *browser, ns string) {
	t.Helper()
	ctx := context.Background()
	quota := fillConfigMapQuota(t, ns)
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, "stuck", "Dune", 10), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(t, "pick the stuck Book", chromedp.SetValue("#book", ns+"/stuck"), chromedp.Click(`#pick button`))
	waitFor(t, b, "four refused syncs",
		`document.querySelectorAll("#timeline li[data-kind=sync].bad").length >= 4`, 45*time.Second)
	steps := timeline(t, b)
	if !slices.ContainsFunc(steps, func(s string) bool { return strings.Contains(s, "(refused: ConfigMapQuotaExceeded)") }) {
		t.Errorf("no sync step names the refusal ConfigMapQuotaExceeded:\n%s", strings.Join(steps, "\n"))
	}
	backoffs := eval[[]float64](t, b, "read the backoffs", `Array.from(document.querySelectorAll("#timeline li[data-kind=sync]"))
		.map(li => li.textContent.match(/retry after ([0-9.]+) (ms|s)/)).filter(m => m)
		.map(m => parseFloat(m[1]) * (m[2] === "s" ? 1000 : 1))`)
	if len(backoffs) < 4 {
		t.Fatalf("the timeline shows %d failed syncs with a backoff, want at least 4", len(backoffs))
	}
	for i := 1; i < len(backoffs); i++ {
		if backoffs[i] <= backoffs[i-1] {
			t.Errorf("backoffs do not grow: %v ms", backoffs)
		}
	}
	waitFor(t, b, "the refusal counted in the sync box",
		`document.getElementById("fig-sync").textContent.includes("refused: ConfigMapQuotaExceeded")`, 10*time.Second)
	b.screenshot(t, "backoff.png")
	if err := env.Kube.CoreV1().ResourceQuotas(ns).Delete(ctx, quota, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Within one conflict recheck (30 s) of the quota's deletion.
	waitFor(t, b, "the ConfigMap to be created",
		`Array.from(document.querySelectorAll("#timeline li[data-kind=write]")).some(li => li.textContent.includes("create configmaps → 201"))`,
		60*time.Second)
}

// fillConfigMapQuota creates a ResourceQuota on count/configmaps as large
// as the namespace's ConfigMaps, and waits until the quota controller has
// counted them, so that the next create is refused.
func fillConfigMapQuota(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := resource.NewQuantity(int64(len(cms.Items)), resource.DecimalSI)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps-full"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": *full}},
	}
	if _, err := env.Kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the quota to count the ConfigMaps", func(ctx context.Context) error {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if used, ok := q.Status.Used["count/configmaps"]; !ok || !used.Equal(*full) {
			return fmt.Errorf("status.used %v, want count/configmaps %v", q.Status.Used, full)
		}
		return nil
	})
	return quota.Name
}

// checkAPIServerOutage stops the API server and waits until the page shows
// requests left without an answer (the Reflectors retrying their watches).
// The API server stays down: this is the package's last test, and
// TestMain's teardown stops the cluster. (Starting it again took over a
// minute on a loaded machine, longer than StartAPIServer waits.)
func checkAPIServerOutage(t *testing.T, b *browser) {
	t.Helper()
	if err := env.Cluster.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, "the page to show requests without an answer",
		`document.getElementById("fig-requests").textContent.includes("requests <error>")`, 45*time.Second)
}

// waitFor waits until the JavaScript expression is true in the page, and
// shows the timeline if it never is.
func waitFor(t *testing.T, b *browser, what, expr string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout))); err != nil {
		t.Fatalf("%s: %v\ntimeline %s:\n%s", what, err,
			eval[string](t, b, "read the timeline's title", `document.getElementById("timeline-title").textContent`),
			strings.Join(timeline(t, b), "\n"))
	}
}

// timeline returns the text of each step the page's timeline shows.
func timeline(t *testing.T, b *browser) []string {
	return eval[[]string](t, b, "read the timeline",
		`Array.from(document.querySelectorAll("#timeline li")).map(li => li.querySelector(".k").textContent + ": " + li.lastChild.textContent)`)
}

// waitLive waits until the event stream has delivered a first update.
func waitLive() chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`document.getElementById("status").textContent === "live" && document.querySelector("#fig-queue dd") !== null`,
		chromedp.WithPollingTimeout(30*time.Second))
}

// waitForSteps waits until the timeline holds the steps of want in order
// (each a prefix of a step's text, * matching a number), each write's echo,
// and nothing else.
func waitForSteps(t *testing.T, b *browser, what string, want []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := timeline(t, b)
		err := matchSteps(got, want)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v\ntimeline:\n%s", what, err, strings.Join(got, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// matchSteps checks that got is want in order with, for each write, the
// watch event the page names as its echo, and no other step. (The echo can
// come before the write's answer: the watch and the response race.)
func matchSteps(got, want []string) error {
	next := 0
	echoed := map[int]bool{}
	for i, step := range got {
		if next < len(want) && matchStep(step, want[next]) {
			next++
			continue
		}
		_, after, isEcho := strings.Cut(step, "skipped-echo, the echo of step ")
		after, _, _ = strings.Cut(after, " ")
		n, err := strconv.Atoi(after)
		if !isEcho || err != nil || n < 1 || n > len(got) || !strings.HasPrefix(got[n-1], "API write:") {
			return fmt.Errorf("step %d %q is not the next one expected (%q) nor the echo of an earlier write", i+1, step, wantAt(want, next))
		}
		echoed[n] = true
	}
	if next < len(want) {
		return fmt.Errorf("%d of %d steps so far; waiting for %q", next, len(want), want[next])
	}
	for i, step := range got {
		if strings.HasPrefix(step, "API write:") && !echoed[i+1] {
			return fmt.Errorf("write at step %d has no echo yet", i+1)
		}
	}
	return nil
}

func wantAt(want []string, i int) string {
	if i < len(want) {
		return want[i]
	}
	return "nothing more"
}

// matchStep matches a step's text against a pattern in which each * is a
// resourceVersion and the text may go on after the pattern.
func matchStep(got, pattern string) bool {
	parts := strings.Split(pattern, "*")
	rest, ok := strings.CutPrefix(got, parts[0])
	for _, p := range parts[1:] {
		if !ok {
			return false
		}
		rv := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if rv <= 0 {
			return false
		}
		rest, ok = strings.CutPrefix(rest[rv:], p)
	}
	return ok
}

// figures reads every label and value the page's boxes show.
func figures(t *testing.T, b *browser) map[string]string {
	t.Helper()
	return eval[map[string]string](t, b, "read the figures", `(() => {
		const out = {};
		for (const dt of document.querySelectorAll(".pipeline dt")) out[dt.textContent] = dt.nextElementSibling.textContent;
		return out;
	})()`)
}

func number(t *testing.T, s string) float64 {
	t.Helper()
	n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Fatalf("figure %q is not a number: %v", s, errors.Unwrap(err))
	}
	return n
}
