package ui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestPageFollowsABook is a learner's first visit: the page loads from the
// controller, a Book is created, its spec edited and its ConfigMap edited
// by hand, and the page shows each journey's steps in order, with the
// queue's and the workers' figures moving and no error in the console;
// then the API server stops and the page shows the Reflectors' retries.
// At 390×844 (a phone) nothing is wider than the screen.
func TestPageFollowsABook(t *testing.T) {
	ns := env.Namespace(t)
	uiAddr := framework.FreeAddr(t)
	framework.StartProcess(t, "book-controller", binary, "-kubeconfig", env.Cluster.KubeconfigPath(),
		"--namespace", ns, "--leader-elect-namespace", ns,
		"--metrics-bind-address", framework.FreeAddr(t), "--health-probe-bind-address", framework.FreeAddr(t),
		"--ui-bind-address", uiAddr)
	framework.Eventually(t, "the UI to answer", framework.AnswersOK(uiAddr, "/api/snapshot"))
	b := newBrowser(t)
	b.do(t, "load the page", chromedp.Navigate("http://"+uiAddr+"/"), waitLive())
	before := figures(t, b)
	if before["leading"] == "" {
		t.Fatalf("the page shows no leadership figure: %v", before)
	}

	ctx := context.Background()
	if _, err := env.Books.WebappV1().Books(ns).Create(ctx, framework.NewBook(ns, "travel", "Dune", 10), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b.do(t, "pick the Book", chromedp.SendKeys("#book", ns+"/travel"), chromedp.Click(`#pick button`))
	created := []string{
		"watch event: books add at RV * → enqueued",
		"worker: took it after",
		"API write: create configmaps → 201",
		"API write: update-status books.webapp.ydzs.io → 200",
		"sync: success",
		"watch event: configmaps add at RV * → skipped-echo, the echo of step",
		"watch event: books update at RV * → skipped-echo, the echo of step",
	}
	waitForSteps(t, b, "the journey of the new Book", created)

	patch := []byte(`{"spec":{"price":12}}`)
	if _, err := env.Books.WebappV1().Books(ns).Patch(ctx, "travel", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	edited := append(created, "watch event: books update at RV * → enqueued", "worker: took it after",
		"API write: update configmaps → 200", "API write: update-status books.webapp.ydzs.io → 200", "sync: success")
	waitForSteps(t, b, "the journey after the edit", edited)

	cmPatch := []byte(`{"data":{"price":"1"}}`)
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, "travel", types.MergePatchType, cmPatch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	repaired := append(edited, "watch event: configmaps update at RV * → enqueued", "worker: took it after",
		"API write: update configmaps → 200", "sync: success")
	waitForSteps(t, b, "the journey of the repair", repaired)

	after := figures(t, b)
	for _, f := range []string{"adds", "keys taken", "success"} {
		if number(t, after[f]) <= number(t, before[f]) {
			t.Errorf("figure %q did not move: %s before, %s after", f, before[f], after[f])
		}
	}
	b.screenshot(t, "desktop.png")
	checkPhone(t, b, uiAddr)
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
	b.do(t, "back to the desktop size", chromedp.EmulateReset())
}

// checkAPIServerOutage stops the API server and waits until the page shows
// the Reflectors' failing watches, then starts it again.
func checkAPIServerOutage(t *testing.T, b *browser) {
	t.Helper()
	if err := env.Cluster.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			if err := env.Cluster.StartAPIServer(context.Background()); err != nil {
				t.Fatalf("restarting kube-apiserver: %v", err)
			}
		}
	}
	defer restart()
	b.do(t, "the page to show relists",
		chromedp.Poll[chromedp.Void](`document.querySelector("#fig-reflector .note") !== null`, chromedp.WithPollingTimeout(45*time.Second)))
	relists := eval[string](t, b, "read the Reflector box", `document.getElementById("fig-reflector").textContent`)
	if !strings.Contains(relists, "last watch error") {
		t.Errorf("the Reflector box does not show the watch error: %q", relists)
	}
	restart()
}

// waitLive waits until the event stream has delivered a first update.
func waitLive() chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`document.getElementById("status").textContent === "live" && document.querySelector("#fig-queue dd") !== null`,
		chromedp.WithPollingTimeout(30*time.Second))
}

// waitForSteps waits until the timeline holds want in order (each line a
// prefix of a step's text, * matching any resourceVersion), and nothing
// else between them.
func waitForSteps(t *testing.T, b *browser, what string, want []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := eval[[]string](t, b, "read the timeline",
			`Array.from(document.querySelectorAll("#timeline li")).map(li => li.querySelector(".k").textContent + ": " + li.lastChild.textContent)`)
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

func matchSteps(got, want []string) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d steps, want %d", len(got), len(want))
	}
	for i := range want {
		if !matchStep(got[i], want[i]) {
			return fmt.Errorf("step %d is %q, want %q", i+1, got[i], want[i])
		}
	}
	return nil
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
