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

package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/metrics"
)

var configMapsGR = schema.GroupResource{Resource: "configmaps"}

// The API server's answers, worded as kube-apiserver words them.
var (
	errQuotaFull = apierrors.NewForbidden(configMapsGR, "demo", errors.New(
		"exceeded quota: cms, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2"))
	errQuotaUnknown = apierrors.NewForbidden(configMapsGR, "demo", errors.New(
		"status unknown for quota: cms, resources: count/configmaps"))
	errPolicyDenied = &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
		Message: `configmaps "demo" is forbidden: ValidatingAdmissionPolicy 'no-demo' with binding 'no-demo' denied request: demo ConfigMaps are not allowed here`,
	}}
	errWebhookDenied = &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: `admission webhook "cm.example.com" denied the request: label team is required`,
	}}
	errWebhookDown = apierrors.NewInternalError(errors.New(
		`failed calling webhook "cm.example.com": failed to call webhook: Post "https://127.0.0.1:9443/validate?timeout=1s": context deadline exceeded`))
	errRBAC = apierrors.NewForbidden(configMapsGR, "demo", errors.New(
		`User "system:serviceaccount:x:book-controller" cannot create resource "configmaps" in API group "" in the namespace "default"`))
)

func TestAsRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // the reason; "" for an error a retry may cure
	}{
		{"quota full", errQuotaFull, ReasonConfigMapQuotaExceeded},
		{"quota not yet counted", errQuotaUnknown, ReasonConfigMapQuotaExceeded},
		{"policy denies", errPolicyDenied, ReasonConfigMapAdmissionDenied},
		{"webhook denies", errWebhookDenied, ReasonConfigMapAdmissionDenied},
		{"webhook cannot be called", errWebhookDown, ReasonConfigMapAdmissionError},
		{"RBAC", errRBAC, ReasonConfigMapForbidden},
		{"wrapped", fmt.Errorf("creating ConfigMap default/demo: %w", errQuotaFull), ReasonConfigMapQuotaExceeded},
		{"invalid object", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "demo", nil), ReasonConfigMapAdmissionDenied},
		{"etcd full", apierrors.NewInternalError(errors.New("etcdserver: mvcc: database space exceeded")), ""},
		{"throttled", apierrors.NewTooManyRequests("too many requests", 1), ""},
		{"timeout", apierrors.NewTimeoutError("slow", 1), ""},
		{"conflict", apierrors.NewConflict(configMapsGR, "demo", errors.New("stale")), ""},
		{"not an API error", errors.New("connection refused"), ""},
		{"no error", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := asRefusal(tc.err)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("asRefusal: got %s, want nil (retry with backoff)", got.reason)
			case tc.want != "" && got == nil:
				t.Errorf("asRefusal: got nil, want %s", tc.want)
			case got != nil && got.reason != tc.want:
				t.Errorf("asRefusal: got %s, want %s", got.reason, tc.want)
			case got != nil && !errors.Is(got, tc.err):
				t.Errorf("the refusal does not wrap the API server's error")
			}
		})
	}
}

// TestSyncRefusedCreateSaysWhy: the API server refuses the ConfigMap. The
// Book says why in Ready (reason and the server's own message), one Warning
// marks the episode, later refusals write nothing new, and once the cause
// is gone the next sync creates the ConfigMap.
func TestSyncRefusedCreateSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		err        error
		reason     string
		inMessage  string
		eventStart string
	}{
		{errQuotaFull, ReasonConfigMapQuotaExceeded, "exceeded quota: cms", "Warning ConfigMapQuotaExceeded ConfigMap demo could not be written, a ResourceQuota is full"},
		{errPolicyDenied, ReasonConfigMapAdmissionDenied, "demo ConfigMaps are not allowed here", "Warning ConfigMapAdmissionDenied ConfigMap demo could not be written, admission denied it"},
		{errWebhookDown, ReasonConfigMapAdmissionError, "context deadline exceeded", "Warning ConfigMapAdmissionError ConfigMap demo could not be written, an admission webhook failed"},
		{errRBAC, ReasonConfigMapForbidden, "cannot create resource", "Warning ConfigMapForbidden ConfigMap demo could not be written, the controller may not write it"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			f := newFixture(t, Options{}, newBook("demo", 1, "T", 1))
			var refusing atomic.Bool
			refusing.Store(true)
			f.kubeClient.PrependReactor("create", "configmaps", func(core.Action) (bool, runtime.Object, error) {
				if refusing.Load() {
					return true, nil, tc.err
				}
				return false, nil, nil
			})

			err := f.sync("demo")
			var refused *refusalError
			if !errors.As(err, &refused) || refused.reason != tc.reason {
				t.Fatalf("syncHandler: got %v, want a %s refusal for the worker loop", err, tc.reason)
			}
			cond := f.expectReady("demo", metav1.ConditionFalse, tc.reason)
			if !strings.Contains(cond.Message, tc.inMessage) {
				t.Errorf("Ready message %q does not carry the API server's %q", cond.Message, tc.inMessage)
			}
			f.expectEvents(tc.eventStart)

			// Refused again: same status, so no write and no second Warning.
			f.feedBackBook("demo")
			f.clearActions()
			if err := f.sync("demo"); asRefusal(err) == nil {
				t.Fatalf("second sync: got %v, want the refusal again", err)
			}
			if n := len(f.statusWrites()); n != 0 {
				t.Errorf("status writes on the second refusal: got %d, want 0", n)
			}
			f.expectEvents()

			refusing.Store(false)
			f.feedBackBook("demo")
			f.mustSync("demo")
			f.expectConfigMapMatches(f.getBook("demo"))
			f.expectReady("demo", metav1.ConditionTrue, ReasonConfigMapReady)
			f.expectEvents(eventCreated + "demo")
		})
	}
}

// TestSyncRefusedRepairSaysWhy: a policy that refuses the update of an
// edited ConfigMap ends the same way as a refused create.
func TestSyncRefusedRepairSaysWhy(t *testing.T) {
	book := withReadyStatus(newBook("demo", 2, "New title", 1), t0)
	f := newFixture(t, Options{}, book, ownConfigMap(newBook("demo", 1, "Old title", 1)))
	f.kubeClient.PrependReactor("update", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errWebhookDenied
	})

	if err := f.sync("demo"); asRefusal(err) == nil {
		t.Fatalf("syncHandler: got %v, want a refusal", err)
	}
	cond := f.expectReady("demo", metav1.ConditionFalse, ReasonConfigMapAdmissionDenied)
	if !strings.Contains(cond.Message, "label team is required") {
		t.Errorf("Ready message %q does not carry the webhook's reason", cond.Message)
	}
	f.expectEvents("Warning ConfigMapAdmissionDenied ")
}

// TestRefusalIsRetriedWithinTheRecheck: a refused key backs off like any
// failing key (its requeue count grows), but never waits longer than the
// recheck, even when the backoff has grown past it.
func TestRefusalIsRetriedWithinTheRecheck(t *testing.T) {
	hour := workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour)
	f := newFixture(t, Options{RateLimiter: hour, ConflictRecheck: 20 * time.Millisecond})
	key := bookKey("demo")
	f.c.syncHandler = func(context.Context, cache.ObjectName) (Result, error) {
		return Result{}, &refusalError{reason: ReasonConfigMapQuotaExceeded, err: errQuotaFull}
	}
	before := testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(Name, metrics.ResultError))
	for i := 1; i <= 2; i++ {
		f.c.queue.Add(key)
		if !f.c.processNextWorkItem(t.Context(), 0) {
			t.Fatal("processNextWorkItem returned false on a live queue")
		}
		if n := f.c.queue.NumRequeues(key); n != i {
			t.Errorf("NumRequeues after %d refusals: got %d, want %d (the backoff grows)", i, n, i)
		}
		// Back within the 20ms recheck, not the hour of backoff.
		poll.Eventually(t, "the refused key", pollInterval, pollTimeout, queueLength(f.c.queue, 1))
		key, _ := f.c.queue.Get()
		f.c.queue.Done(key)
	}
	if got := testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(Name, metrics.ResultError)) - before; got != 2 {
		t.Errorf("reconcile_total{result=error}: grew by %v, want 2", got)
	}
}

// TestRefusedBookBackoffSurvivesItsStatusWrite: a refused sync writes the
// Book's status, and a retry that comes before the status's event only waits
// for the cache. That wait is no success: the backoff must not start over,
// or the retries after each status write would come at the first step again
// (the live view showed 5, 5, 10, 20 ms).
func TestRefusedBookBackoffSurvivesItsStatusWrite(t *testing.T) {
	f := newFixture(t, Options{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour)},
		newBook("demo", 1, "T", 1))
	f.kubeClient.PrependReactor("create", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errQuotaFull
	})
	key := bookKey("demo")
	step := func(what string, wantRequeues int) {
		t.Helper()
		f.c.queue.Add(key)
		if !f.c.processNextWorkItem(t.Context(), 0) {
			t.Fatal("processNextWorkItem returned false on a live queue")
		}
		if n := f.c.queue.NumRequeues(key); n != wantRequeues {
			t.Errorf("NumRequeues after %s: got %d, want %d", what, n, wantRequeues)
		}
	}
	step("the first refusal", 1)
	if n := len(f.statusWrites()); n != 1 {
		t.Fatalf("status writes after the first refusal: got %d, want 1", n)
	}
	step("a retry while the cache lacks the status write", 1)
	f.feedBackBook("demo")
	step("the second refusal", 2)
	if n := len(f.statusWrites()); n != 1 {
		t.Errorf("status writes after the second refusal: got %d, want 1 (unchanged status)", n)
	}
}

func TestRefusalMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é", maxRefusalMessage) // two bytes each
	r := asRefusal(apierrors.NewForbidden(configMapsGR, "demo", errors.New("admission webhook \"w\" denied the request: "+long)))
	msg := r.condition(newBook("demo", 1, "T", 1)).Message
	if len(msg) > maxRefusalMessage+200 {
		t.Errorf("message of %d bytes, want at most about %d", len(msg), maxRefusalMessage)
	}
	if !utf8.ValidString(msg) {
		t.Errorf("message cut inside a character")
	}
}

// TestNotReadyBooksTimesTheOldest: the alert's figures follow the Books'
// statuses: the count of Books not Ready and since when the oldest of them
// has not been Ready, back to 0 when all are.
func TestNotReadyBooksTimesTheOldest(t *testing.T) {
	n := newNotReadyBooks()
	n.start()
	defer n.stop()
	created := newBook("fresh", 1, "T", 1)
	created.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	refused := newBook("refused", 1, "T", 1)
	refused.Status = computeStatus(refused, (&refusalError{reason: ReasonConfigMapQuotaExceeded, err: errQuotaFull}).condition(refused), t0)
	ready := withReadyStatus(newBook("ready", 1, "T", 1), t0)

	expect := func(count int, since time.Time) {
		t.Helper()
		if got := testutil.ToFloat64(metrics.BooksNotReady); got != float64(count) {
			t.Errorf("books_not_ready: got %v, want %d", got, count)
		}
		want := 0.0
		if !since.IsZero() {
			want = float64(since.Unix())
		}
		if got := testutil.ToFloat64(metrics.NotReadySince); got != want {
			t.Errorf("not_ready_since: got %v, want %v", got, want)
		}
	}
	n.bookChanged(ready, false)
	expect(0, time.Time{})
	n.bookChanged(created, false)
	expect(1, t0.Add(time.Minute))
	n.bookChanged(refused, false)
	expect(2, t0)
	refused.Status = computeStatus(refused, readyCondition(refused), t0.Add(2*time.Minute))
	n.bookChanged(refused, false)
	expect(1, t0.Add(time.Minute))
	n.bookChanged(created, true) // deleted
	expect(0, time.Time{})

	// A second controller in the process (another shard held): the gauges
	// are over both, and a controller that stops takes its Books with it.
	other := newNotReadyBooks()
	other.start()
	n.bookChanged(created, false)
	elsewhere := refused2(t)
	other.bookChanged(elsewhere, false)
	expect(2, t0)
	other.stop()
	expect(1, t0.Add(time.Minute))
}

// refused2 is a Book of another namespace, not Ready since t0.
func refused2(t *testing.T) *webappv2.Book {
	t.Helper()
	b := newBook("refused", 1, "T", 1)
	b.Namespace = "shard-2"
	b.Status = computeStatus(b, (&refusalError{reason: ReasonConfigMapQuotaExceeded, err: errQuotaFull}).condition(b), t0)
	return b
}

// TestBookEventsFeedTheNotReadyFigures: a refused Book counts as not Ready
// from the event that brings its status write back (our own write's echo,
// which queues nothing), and stops counting when it is Ready.
func TestBookEventsFeedTheNotReadyFigures(t *testing.T) {
	f := newFixture(t, Options{}, newBook("demo", 1, "T", 1))
	f.c.readiness.start() // as Run does
	defer f.c.readiness.stop()
	h := f.c.bookEventHandler()
	var refusing atomic.Bool
	refusing.Store(true)
	f.kubeClient.PrependReactor("create", "configmaps", func(core.Action) (bool, runtime.Object, error) {
		if refusing.Load() {
			return true, nil, errQuotaFull
		}
		return false, nil, nil
	})
	_ = f.sync("demo")
	before := f.feedBackBook("demo")
	h.OnUpdate(newBook("demo", 1, "T", 1), before)
	if got := testutil.ToFloat64(metrics.BooksNotReady); got != 1 {
		t.Errorf("books_not_ready after the refusal: got %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.NotReadySince); got != float64(t0.Unix()) {
		t.Errorf("not_ready_since: got %v, want the refusal's transition %v", got, t0.Unix())
	}
	refusing.Store(false)
	f.mustSync("demo")
	h.OnUpdate(before, f.feedBackBook("demo"))
	if got := testutil.ToFloat64(metrics.BooksNotReady); got != 0 {
		t.Errorf("books_not_ready once Ready: got %v, want 0", got)
	}
}
