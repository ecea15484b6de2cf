//go:build chaos && linux

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

package chaos_test

// Shared pieces of the tests in which the API server itself refuses the
// controller's ConfigMap writes (issue 27, items 4 to 6): an admission
// policy or webhook says no or times out, a quota is full, a finalizer
// holds the name. Each refusal must end in a clear status and one Warning
// event per Book, bounded retries counted from the API server's audit log,
// and convergence once the refusal ends.

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

const (
	// refusalRecheck is the controller's ConflictRecheck in these tests:
	// the cap of the per-key backoff while the API server refuses a Book's
	// ConfigMap (the framework's default, 1 s, would make retry counts
	// less telling).
	refusalRecheck = 5 * time.Second
	// refusalWindow is how long retries are counted while a refusal lasts.
	refusalWindow = 20 * time.Second
	// firstBackoff is the queue's first per-key delay, doubled on each
	// failure up to refusalRecheck.
	firstBackoff = 5 * time.Millisecond
)

// maxAttempts is the most write attempts one Book may make in window while
// every attempt is refused: the first, the doublings from firstBackoff up
// to refusalRecheck, then one per refusalRecheck, and two more for the
// events that requeue a Book at once (its own status write). A hot loop
// makes hundreds.
func maxAttempts(window time.Duration) int {
	doublings := int(math.Ceil(math.Log2(float64(refusalRecheck) / float64(firstBackoff))))
	return 1 + doublings + int(math.Ceil(float64(window)/float64(refusalRecheck))) + 2
}

// startRefusalController runs the in-process controller for ns with
// refusalRecheck and returns its metrics address once it serves.
func startRefusalController(t *testing.T, ns string) string {
	t.Helper()
	return startRefusalControllerWatched(t, ns, nil)
}

// startRefusalControllerWatched is startRefusalController with syncs told
// of every sync (nudge), if not nil.
func startRefusalControllerWatched(t *testing.T, ns string, syncs *syncLog) string {
	t.Helper()
	addr := framework.FreeAddr(t)
	opts := framework.ControllerOptions{Namespace: ns, MetricsAddr: addr, ConflictRecheck: refusalRecheck}
	if syncs != nil {
		opts.Observer = syncs
	}
	env.StartController(t, opts)
	waitMetricsUp(t, addr)
	return addr
}

// restRequests is the controller's rest_client_requests_total for method
// and code: a cross-check of the audit log's counts (process-wide, so
// taken as a difference while only this test's controller runs).
func restRequests(t *testing.T, addr, method, code string) float64 {
	t.Helper()
	return metricValue(t, addr, "rest_client_requests_total", "method", method, "code", code)
}

// deleteAtCleanup deletes a cluster-scoped object at the end of the test,
// pass or fail, unless the test deleted it already: the control plane is
// shared, and a policy or webhook left behind would break later tests.
// Register it before the controller starts, so that it runs after the
// controller has stopped and before the namespace goes.
func deleteAtCleanup(t *testing.T, what string, del func(ctx context.Context) error) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s at cleanup: %v", what, err)
		}
	})
}

// namespaceSelector selects the namespace ns alone.
func namespaceSelector(ns string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
}

// waitRootCA waits until the controller manager has published
// kube-root-ca.crt into ns, so that admission set up afterwards does not
// meet it and it is in a quota's count from the start.
func waitRootCA(t *testing.T, ns string) {
	t.Helper()
	env.WaitForConfigMap(t, ns, "kube-root-ca.crt", "to be published", func(*corev1.ConfigMap) bool { return true })
}

// probeUntil dry-runs the creation of a ConfigMap named name in ns until
// judge accepts the answer: the moment an admission object just created
// (or a quota) is in effect in the API server.
func probeUntil(t *testing.T, ns, name, what string, judge func(*corev1.ConfigMap, error) error) time.Duration {
	t.Helper()
	start := time.Now()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"probe": "yes"}},
		Data: map[string]string{controller.TitleKey: "probe", controller.PriceKey: "0"}}
	poll.Eventually(t, what, 200*time.Millisecond, time.Minute, func(ctx context.Context) error {
		got, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return judge(got, err)
	})
	return time.Since(start)
}

// refusal is the state of a Book whose ConfigMap write the API server
// refuses: Ready=False with reason for its current generation, a message
// holding each of message, and either no ConfigMap of its name (the create
// is refused) or, with keeps, its ConfigMap still holding that spec (the
// update is refused).
type refusal struct {
	reason  string
	message []string
	keeps   *spec
}

// refusedProblems compares ns with a fault in place: each Book of ok Ready
// with its ConfigMap just as inspect wants it, each of refused as its
// refusal says. It returns what differs.
func refusedProblems(ctx context.Context, ns string, ok map[string]spec, refused map[string]refusal) ([]string, error) {
	bookList, err := env.Books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	cmList, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	cms := map[string]*corev1.ConfigMap{}
	for i := range cmList.Items {
		cms[cmList.Items[i].Name] = &cmList.Items[i]
	}
	var problems []string
	seen := map[string]bool{}
	for i := range bookList.Items {
		b := &bookList.Items[i]
		seen[b.Name] = true
		ready := meta.FindStatusCondition(b.Status.Conditions, controller.ConditionReady)
		current := ready != nil && ready.ObservedGeneration == b.Generation && b.Status.ObservedGeneration == b.Generation
		cm := cms[b.Name]
		if r, isRefused := refused[b.Name]; isRefused {
			switch {
			case !current || ready.Status != metav1.ConditionFalse || ready.Reason != r.reason:
				problems = append(problems, fmt.Sprintf("Book %s: want Ready=False %s, status is %s", b.Name, r.reason, framework.DescribeBook(b)))
			case !containsAll(ready.Message, r.message):
				problems = append(problems, fmt.Sprintf("Book %s: message %q lacks %q", b.Name, ready.Message, r.message))
			}
			switch {
			case r.keeps == nil && cm != nil:
				problems = append(problems, fmt.Sprintf("Book %s: its create is refused, yet ConfigMap %s exists (UID %s)", b.Name, cm.Name, cm.UID))
			case r.keeps != nil && (cm == nil || !metav1.IsControlledBy(cm, b)):
				problems = append(problems, fmt.Sprintf("Book %s: its ConfigMap is gone or not controlled by it", b.Name))
			case r.keeps != nil && (cm.Data[controller.TitleKey] != r.keeps.title || cm.Data[controller.PriceKey] != fmt.Sprint(r.keeps.price)):
				problems = append(problems, fmt.Sprintf("Book %s: its update is refused, yet its ConfigMap holds %q, not the spec before (%q/%d)",
					b.Name, cm.Data, r.keeps.title, r.keeps.price))
			}
			continue
		}
		s, isOK := ok[b.Name]
		switch {
		case !isOK:
			problems = append(problems, fmt.Sprintf("Book %s was not created by the test", b.Name))
			continue
		case b.Spec.Title != s.title || b.Spec.Price != webappv2.WholePrice(s.price):
			problems = append(problems, fmt.Sprintf("Book %s has spec %q/%d, the test wrote %q/%d", b.Name, b.Spec.Title, b.Spec.Price.WholeUnits(), s.title, s.price))
		case !current || ready.Status != metav1.ConditionTrue || ready.Reason != controller.ReasonConfigMapReady:
			problems = append(problems, fmt.Sprintf("Book %s: want Ready=True, status is %s", b.Name, framework.DescribeBook(b)))
		case cm == nil || !metav1.IsControlledBy(cm, b):
			problems = append(problems, fmt.Sprintf("Book %s: no ConfigMap it controls", b.Name))
		default:
			if p := configMapProblem(b, cm); p != "" {
				problems = append(problems, fmt.Sprintf("Book %s: %s", b.Name, p))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ok)) {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("Book %s is gone", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(refused)) {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("Book %s is gone", name))
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// waitRefused waits until ns shows the fault as refusedProblems wants it
// and returns how long that took.
func waitRefused(t *testing.T, ns string, ok map[string]spec, refused map[string]refusal) time.Duration {
	t.Helper()
	start := time.Now()
	poll.Eventually(t, fmt.Sprintf("%d Books Ready and %d refused", len(ok), len(refused)), 250*time.Millisecond, time.Minute,
		func(ctx context.Context) error {
			problems, err := refusedProblems(ctx, ns, ok, refused)
			if err != nil {
				return err
			}
			return poll.Done(len(problems) == 0, "%d problems; the first:\n  %s", len(problems),
				strings.Join(problems[:min(len(problems), 10)], "\n  "))
		})
	return time.Since(start)
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// refusedAll returns a refusal of reason and message for each name.
func refusedAll(names []string, reason string, message ...string) map[string]refusal {
	out := make(map[string]refusal, len(names))
	for _, name := range names {
		out[name] = refusal{reason: reason, message: message}
	}
	return out
}

// bookWarnings counts the Warning events (events.k8s.io) the controller
// reported about each Book of ns, by reason. An event the recorder turned
// into a series counts as often as it occurred.
func bookWarnings(t *testing.T, ns string) map[string]map[string]int {
	t.Helper()
	list, err := env.Kube.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int{}
	for _, ev := range list.Items {
		if ev.Type != corev1.EventTypeWarning || ev.Regarding.Kind != "Book" || ev.ReportingController != controller.ReportingController {
			continue
		}
		n := 1
		if ev.Series != nil {
			n = int(ev.Series.Count)
		}
		if out[ev.Regarding.Name] == nil {
			out[ev.Regarding.Name] = map[string]int{}
		}
		out[ev.Regarding.Name][ev.Reason] += n
	}
	return out
}

// expectOneWarning checks that each of names has exactly one Warning
// event, of reason, and no other Book of ns has any. It waits a little for
// events still in the recorder's queue. It returns how many Warnings there
// are.
func expectOneWarning(t *testing.T, ns string, names []string, reason string) int {
	t.Helper()
	var got map[string]map[string]int
	var problems []string
	check := func(context.Context) error {
		got = bookWarnings(t, ns)
		problems = problems[:0]
		for _, name := range names {
			if n := got[name][reason]; n != 1 || len(got[name]) != 1 {
				problems = append(problems, fmt.Sprintf("Book %s: Warnings %v, want exactly one %s", name, got[name], reason))
			}
		}
		for name, byReason := range got {
			if !slices.Contains(names, name) {
				problems = append(problems, fmt.Sprintf("Book %s: Warnings %v, want none", name, byReason))
			}
		}
		slices.Sort(problems)
		return poll.Done(len(problems) == 0, "%s", strings.Join(problems, "; "))
	}
	// Too few may still come; too many won't go away.
	if err := poll.Until(t.Context(), "one Warning per refused Book", 250*time.Millisecond, 10*time.Second, check); err != nil {
		t.Error(err)
	}
	total := 0
	for _, byReason := range got {
		for _, n := range byReason {
			total += n
		}
	}
	return total
}

// controllerWrites are the controller's writes in ns, from the audit log.
func controllerWrites(t *testing.T, ns string) []framework.AuditWrite {
	t.Helper()
	return framework.ControllerWrites(env.AuditLog(t), ns)
}

// configMapAttempts counts the controller's ConfigMap writes with verb in
// ns to each of names received in [from, from+window), and what the API
// server answered them.
func configMapAttempts(writes []framework.AuditWrite, ns, verb string, names []string, from time.Time, window time.Duration) (perBook map[string]int, codes map[int32]int) {
	perBook, codes = map[string]int{}, map[int32]int{}
	for _, w := range writes {
		name := strings.TrimPrefix(w.Object, ns+"/")
		if w.Resource != "configmaps" || w.Verb != verb || !slices.Contains(names, name) ||
			w.At.Before(from) || !w.At.Before(from.Add(window)) {
			continue
		}
		perBook[name]++
		codes[w.Code]++
	}
	return perBook, codes
}

// expectBoundedRetries checks the attempts of each refused Book: at least
// one (the audit log does record refused requests), at most maxAttempts,
// and none answered with success. It returns the total and the largest
// count.
func expectBoundedRetries(t *testing.T, what string, names []string, perBook map[string]int, codes map[int32]int, window time.Duration) (total, most int) {
	t.Helper()
	bound := maxAttempts(window)
	for _, name := range names {
		n := perBook[name]
		total += n
		most = max(most, n)
		switch {
		case n == 0:
			t.Errorf("%s: the audit log shows no attempt for Book %s in %v", what, name, window)
		case n > bound:
			t.Errorf("%s: Book %s made %d attempts in %v, want at most %d (backoff from %v capped at %v)",
				what, name, n, window, bound, firstBackoff, refusalRecheck)
		}
	}
	for code, n := range codes {
		if code < 400 {
			t.Errorf("%s: %d attempts answered %d, though the refusal was in place", what, n, code)
		}
	}
	return total, most
}

// webhookCall is one AdmissionReview a webhookServer received.
type webhookCall struct {
	name, user string
	dryRun     bool
	at         time.Time
}

// webhookServer is an admission webhook served by the test on 127.0.0.1
// over TLS, with httptest's self-signed certificate (SAN 127.0.0.1) as the
// caBundle. answer decides each review; it may block (a slow webhook) and
// should return nil once ctx ends, when the API server has given up.
type webhookServer struct {
	srv      *httptest.Server
	caBundle []byte
	answer   func(ctx context.Context, path string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

	mu    sync.Mutex
	calls []webhookCall
	fails []string
}

func startWebhookServer(t *testing.T, answer func(ctx context.Context, path string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *webhookServer {
	t.Helper()
	s := &webhookServer{answer: answer}
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	s.caBundle = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	t.Cleanup(func() {
		s.srv.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, f := range s.fails {
			t.Errorf("webhook server: %s", f)
		}
	})
	return s
}

// clientConfig is the webhook's clientConfig for path.
func (s *webhookServer) clientConfig(path string) (url string, caBundle []byte) {
	return s.srv.URL + path, s.caBundle
}

func (s *webhookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		s.fail("undecodable AdmissionReview to %s: %v", r.URL.Path, err)
		http.Error(w, "want an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	s.mu.Lock()
	s.calls = append(s.calls, webhookCall{name: req.Name, user: req.UserInfo.Username,
		dryRun: req.DryRun != nil && *req.DryRun, at: time.Now()})
	s.mu.Unlock()
	resp := s.answer(r.Context(), r.URL.Path, req)
	if resp == nil {
		return // the API server hung up
	}
	resp.UID = req.UID
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&review); err != nil && r.Context().Err() == nil {
		s.fail("writing the answer: %v", err)
	}
}

func (s *webhookServer) fail(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fails = append(s.fails, fmt.Sprintf(format, args...))
}

// callsBy counts the calls user made (dry runs left out) since from, per
// object name.
func (s *webhookServer) callsBy(user string, from time.Time, until time.Time) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, c := range s.calls {
		if c.user == user && !c.dryRun && !c.at.Before(from) && (until.IsZero() || c.at.Before(until)) {
			out[c.name]++
		}
	}
	return out
}

// controllerUser is the user the in-process controller acts as.
func controllerUser(t *testing.T) string {
	return env.ControllerServiceAccountConfig(t).Impersonate.UserName
}

// allowReview is the answer of a webhook with nothing to object to.
func allowReview() *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true}
}

// isRefusal is a probe's judge: the dry run must fail with an error whose
// message holds part.
func isRefusal(part string) func(*corev1.ConfigMap, error) error {
	return func(_ *corev1.ConfigMap, err error) error {
		switch {
		case err == nil:
			return errors.New("the dry run was accepted")
		case !strings.Contains(err.Error(), part):
			return fmt.Errorf("refused, but not by what the test set up: %w", err)
		}
		return nil
	}
}

// sortedNames returns the sorted keys of m.
func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// union returns a map with the entries of all ms, later ones winning.
func union(ms ...map[string]spec) map[string]spec {
	out := map[string]spec{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}
