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

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/test/integration/framework"
)

// Throttling: API Priority and Fairness puts the controller's requests in
// a priority level of one share that rejects what it cannot seat, with 429
// and Retry-After, while 2,000 Books are created. On the shared API server
// (600 seats) one share of 246 is 3 seats, which the controller's 4
// workers barely exceed: 1.6% of its requests were rejected and 1992 of
// the 2000 Books got their ConfigMap while throttled. So the test runs its
// own API server with a total concurrency of 20 (the default is 600): one
// share is one seat.
const (
	throttledBooks   = 2000
	throttledWorkers = 4                // the framework's default
	throttleHold     = 10 * time.Second // the limit stays this long after the last Book is created
	// clientGoRetries is how often client-go retries a request answered
	// with Retry-After before it returns the error (rest.Request's
	// default maxRetries).
	clientGoRetries = 10
	// retryAfterSlack is how much sooner than its Retry-After a retry may
	// be sent: none is expected (client-go sleeps the Retry-After between
	// the answer and the next attempt), but the clock is read on both sides
	// of the wrapped transport.
	retryAfterSlack = 10 * time.Millisecond
	// The product's default event rate (book-controller --event-qps,
	// --event-burst): the framework's default, no limit, would send each of
	// 2,000 Events from a goroutine of its own, all waiting out Retry-After.
	productEventQPS   = 10
	productEventBurst = 25
)

// TestThrottled runs a control plane of its own whose API server seats 20
// requests at once (--max-requests-inflight=12,
// --max-mutating-requests-inflight=8), and gives the controller's
// ServiceAccount a FlowSchema of its own, matching its requests for Books, ConfigMaps and Events (not its
// discovery), into a PriorityLevelConfiguration of one nominal share that
// neither lends nor borrows seats and rejects what it cannot seat. While
// that holds, 2,000 Books are created. The API server answers 429 with
// Retry-After; the controller must wait out every Retry-After (its own
// transport sends no retry of a request sooner than the Retry-After of the
// 429 before it), its workers' 429s (from the API server's audit log) stay
// within what goroutines that wait at least a second after each can get,
// and its metrics count the 429s. Once the FlowSchema is deleted,
// every Book is Ready with exactly one ConfigMap: nothing is lost.
func TestThrottled(t *testing.T) {
	ctx := context.Background()
	e := ownControlPlane(t, []string{"--max-requests-inflight=12", "--max-mutating-requests-inflight=8"}, nil)
	ns := e.Namespace(t)
	saCfg := e.ControllerServiceAccountConfig(t)
	saNS, saName := serviceAccountOfConfig(t, saCfg)

	metricsAddr := framework.FreeAddr(t)
	attempts := &attemptLog{}
	e.StartController(t, framework.ControllerOptions{Namespace: ns, MetricsAddr: metricsAddr,
		RESTConfig: attempts.wrap(saCfg), Workers: throttledWorkers, ConflictRecheck: 5 * time.Second,
		EventQPS: productEventQPS, EventBurst: productEventBurst})
	waitMetricsUp(t, metricsAddr)

	name := ns + "-throttle"
	fs := throttle(t, e, name, ns, saNS, saName)
	waitClassified(t, saCfg, ns, fs.UID)

	before := apiServerMetrics(t, e)
	pl := []string{"priority_level", name}
	nominal := metricOf(t, before, "apiserver_flowcontrol_nominal_limit_seats", pl...)
	current := metricOf(t, before, "apiserver_flowcontrol_current_limit_seats", pl...)
	if nominal != 1 || current != 1 {
		t.Fatalf("priority level %s has %v nominal and %v current seats: want one", name, nominal, current)
	}
	rejected0 := optionalMetric(before, "apiserver_flowcontrol_rejected_requests_total", pl...)
	dispatched0 := optionalMetric(before, "apiserver_flowcontrol_dispatched_requests_total", pl...)
	client429s0 := metricValue(t, metricsAddr, "rest_client_requests_total", "code", "429")

	throttled := time.Now()
	want := createBooksIn(t, e, ns, "book", throttledBooks)
	created := time.Since(throttled)
	time.Sleep(throttleHold)

	after := apiServerMetrics(t, e)
	rejected := optionalMetric(after, "apiserver_flowcontrol_rejected_requests_total", pl...) - rejected0
	dispatched := optionalMetric(after, "apiserver_flowcontrol_dispatched_requests_total", pl...) - dispatched0
	client429s := metricValue(t, metricsAddr, "rest_client_requests_total", "code", "429") - client429s0
	cms, err := e.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lifted := time.Now()
	window := lifted.Sub(throttled)
	liftThrottle(t, e, name)
	faults.Add(1)
	t.Logf("lifted the limit after %v: %d of %d ConfigMaps exist; the level dispatched %v requests and rejected %v; the controller counted %v 429s",
		window.Round(100*time.Millisecond), len(cms.Items), throttledBooks, dispatched, rejected, client429s)

	took := waitConvergedIn(t, e, ns, expectation{want: want})

	// What the API server received from the controller, write by write.
	writes := framework.ControllerWrites(e.AuditLog(t), ns)
	inWindow := writesBetween(writes, throttled, lifted)
	var workerWrites, worker429s int
	for _, w := range inWindow {
		if w.Resource == "configmaps" || w.Resource == "books/status" {
			workerWrites++
			if w.Code == http.StatusTooManyRequests {
				worker429s++
			}
		}
	}
	gaps, short := attempts.retryGaps()

	switch {
	case rejected == 0:
		t.Errorf("the priority level rejected nothing in %v: the test throttled nothing", window)
	case client429s == 0:
		t.Errorf("the API server rejected %v requests of the controller's priority level, but the controller's rest_client_requests_total counts no 429", rejected)
	case worker429s == 0:
		t.Errorf("the audit log records no 429 answered to the controller's ConfigMap or status writes in the throttled %v", window)
	}
	// A goroutine that waits out each Retry-After (at least a second) gets
	// at most one 429 a second, and an eleventh right after its tenth
	// retry; only the workers write ConfigMaps and status.
	bound := int(math.Ceil((window.Seconds()+1)*(clientGoRetries+1)/clientGoRetries)) * throttledWorkers
	if worker429s > bound {
		t.Errorf("the controller's %d workers got %d 429s on ConfigMap and status writes in %v: more than %d, as if they did not wait out Retry-After",
			throttledWorkers, worker429s, window.Round(100*time.Millisecond), bound)
	}
	if len(gaps) == 0 {
		t.Errorf("no write answered 429 was retried: nothing shows Retry-After was honoured")
	}
	for i, s := range short {
		if i == 10 {
			t.Errorf("... and %d more", len(short)-10)
			break
		}
		t.Errorf("retried sooner than the API server's Retry-After: %s", s)
	}
	figure(t, "priority level of %v nominal seats (%v current), Reject: %d Books created in %v, limit lifted %v later; in the %v throttled the level dispatched %v and rejected %v of the controller's requests (%.1f/s), its workers' writes %d (429×%d, bound %d), rest_client 429s %v; retries after a 429 waited %s; %d of %d ConfigMaps made while throttled; all Ready %v after the lift",
		nominal, current, throttledBooks, created.Round(100*time.Millisecond), throttleHold, window.Round(100*time.Millisecond),
		dispatched, rejected, (dispatched+rejected)/window.Seconds(), workerWrites, worker429s, bound, client429s,
		spread(gaps), len(cms.Items), throttledBooks, took.Round(100*time.Millisecond))
}

// throttle creates the priority level name (one nominal share, nothing
// lent or borrowed, Reject) and a FlowSchema of that name that puts the
// ServiceAccount's requests for Books, ConfigMaps and Events in namespace
// ns there, and deletes both at the end of the test, whatever happens (on
// the shared control plane the tests after this one would be throttled).
func throttle(t *testing.T, e *framework.Env, name, ns, saNS, saName string) *flowcontrolv1.FlowSchema {
	t.Helper()
	ctx := context.Background()
	api := e.Kube.FlowcontrolV1()
	level := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](1),
				LendablePercent:          ptr.To[int32](0),
				// nil would mean no limit on borrowing from the levels
				// that lend (workload-low lends 90%).
				BorrowingLimitPercent: ptr.To[int32](0),
				LimitResponse:         flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			},
		},
	}
	if _, err := api.PriorityLevelConfigurations().Create(ctx, level, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating PriorityLevelConfiguration %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := api.PriorityLevelConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting PriorityLevelConfiguration %s: %v", name, err)
		}
	})
	all := []string{"*"}
	schema := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name},
			// Before service-accounts (9000), which would put the
			// controller in workload-low.
			MatchingPrecedence:  1000,
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{
					Kind:           flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: saNS, Name: saName},
				}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{
					{Verbs: all, APIGroups: []string{"webapp.ydzs.io"}, Resources: []string{"books", "books/status"}, Namespaces: []string{ns}},
					{Verbs: all, APIGroups: []string{""}, Resources: []string{"configmaps", "events"}, Namespaces: []string{ns}},
					{Verbs: all, APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Namespaces: []string{ns}},
				},
			}},
		},
	}
	created, err := api.FlowSchemas().Create(ctx, schema, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating FlowSchema %s: %v", name, err)
	}
	t.Cleanup(func() { liftThrottle(t, e, name) })
	return created
}

// liftThrottle deletes the FlowSchema name; the controller's requests fall
// back to the service-accounts FlowSchema. A second call finds it gone.
func liftThrottle(t *testing.T, e *framework.Env, name string) {
	t.Helper()
	err := e.Kube.FlowcontrolV1().FlowSchemas().Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting FlowSchema %s: %v", name, err)
	}
}

// waitClassified waits until the API server puts a request of the
// ServiceAccount of cfg for the Books of ns in the FlowSchema uid: every
// response names its FlowSchema in X-Kubernetes-PF-FlowSchema-UID, a 429
// too.
func waitClassified(t *testing.T, cfg *rest.Config, ns string, uid types.UID) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("%s/apis/webapp.ydzs.io/v2/namespaces/%s/books?limit=1", cfg.Host, ns)
	poll.Eventually(t, "the controller's requests to be classified by FlowSchema "+string(uid), pollInterval, time.Minute, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		got := resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
		return poll.Done(got == string(uid), "code %d, FlowSchema UID %q", resp.StatusCode, got)
	})
}

// attemptLog records every write a rest.Config's clients send: what it
// was (method, path and a digest of the body, the same for each of
// client-go's attempts at one request and different for two requests: the
// body names the object, or holds its resourceVersion), when it was sent,
// when answered, the code and the Retry-After. The API server's audit log
// cannot tell: a create it refuses with 429 is logged before it is
// decoded, without the object's name.
type attemptLog struct {
	mu       sync.Mutex
	attempts []attempt
}

type attempt struct {
	request    string
	sent, done time.Time
	code       int
	retryAfter time.Duration
}

func (l *attemptLog) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet {
				return rt.RoundTrip(req)
			}
			request := req.Method + " " + req.URL.Path
			if req.GetBody != nil {
				if body, err := req.GetBody(); err == nil {
					h := sha256.New()
					_, _ = io.Copy(h, body)
					body.Close()
					request += fmt.Sprintf(" body %x", h.Sum(nil)[:8])
				}
			}
			a := attempt{request: request, sent: time.Now()}
			resp, err := rt.RoundTrip(req)
			a.done = time.Now()
			if resp != nil {
				a.code = resp.StatusCode
				if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
					a.retryAfter = time.Duration(n) * time.Second
				}
			}
			l.mu.Lock()
			l.attempts = append(l.attempts, a)
			l.mu.Unlock()
			return resp, err
		})
	})
	return cfg
}

// retryGaps returns, sorted, for every request answered 429 that its client
// retried, the time from the answer to the next attempt, and a description
// of each retry sent sooner than the answer's Retry-After. client-go retries
// a 429 after its Retry-After, ten times (clientGoRetries), then returns
// the error: in a run of 429s for one request every eleventh is followed by
// the caller's retry, not client-go's, and is left out.
func (l *attemptLog) retryGaps() (gaps []time.Duration, short []string) {
	l.mu.Lock()
	attempts := slices.Clone(l.attempts)
	l.mu.Unlock()
	slices.SortFunc(attempts, func(a, b attempt) int { return a.sent.Compare(b.sent) })
	series := map[string][]attempt{}
	for _, a := range attempts {
		series[a.request] = append(series[a.request], a)
	}
	for _, s := range series {
		run := 0
		for i, a := range s {
			if a.code != http.StatusTooManyRequests {
				run = 0
				continue
			}
			run++
			if i+1 == len(s) || run%(clientGoRetries+1) == 0 {
				continue
			}
			gap := s[i+1].sent.Sub(a.done)
			gaps = append(gaps, gap)
			if gap < a.retryAfter-retryAfterSlack {
				short = append(short, fmt.Sprintf("%s: 429 with Retry-After %v at %s, attempt %d of a run, sent again %v later",
					a.request, a.retryAfter, a.done.Format("15:04:05.000"), run, gap))
			}
		}
	}
	slices.Sort(gaps)
	return gaps, short
}
