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

package versions_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/webhook"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestConversionWebhook runs the conversion webhook and its certificate
// management in this process on 127.0.0.1, as --webhook-loopback does for
// make run, and has the API server convert through it. It runs before the
// parallel tests, and leaves the CRD pointing at a port no longer served.
func TestConversionWebhook(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)

	// Without a reachable webhook, a v1 client cannot read a v2-stored
	// Book, and the API server says why.
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: "before"},
		Spec: webappv2.BookSpec{Title: "t", Price: webappv2.Price{Amount: "1", Currency: "XXX"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Books.WebappV1().Books(ns).Get(ctx, "before", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "conversion webhook") {
		t.Fatalf("reading a v2-stored Book as v1 without a webhook: err = %v, want a conversion webhook error", err)
	}

	// The webhook, with the certificates switchable under it.
	timing := &reviewTimes{}
	handler := webhook.NewHandler(webhook.NewMetrics(prometheus.NewRegistry()), 0)
	var certs atomic.Pointer[webhook.Certs]
	srv, err := webhook.Listen("127.0.0.1:0", timing.wrap(handler.Mux()), func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return certs.Load().GetCertificate(h)
	}, webhook.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ctx)
	t.Cleanup(srv.Stop)
	url := fmt.Sprintf("https://%s%s", srv.Addr(), webhook.Path)
	certNS := env.Namespace(t)
	start := func(cfg webhook.CertConfig) *webhook.Certs {
		t.Helper()
		cfg.Kube, cfg.CRDs, cfg.Namespace, cfg.LoopbackURL = env.Kube, env.Extensions, certNS, url
		c, err := webhook.NewCerts(cfg)
		if err != nil {
			t.Fatal(err)
		}
		certs.Store(c)
		cctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		if err := c.Start(cctx); err != nil {
			t.Fatal(err)
		}
		// The API server takes up the CRD's new clientConfig soon after.
		poll.Eventually(t, "a v1 read through the webhook", 100*time.Millisecond, 30*time.Second, func(ctx context.Context) error {
			_, err := env.Books.WebappV1().Books(ns).Get(ctx, "before", metav1.GetOptions{})
			return err
		})
		return c
	}
	start(webhook.CertConfig{})

	t.Run("a v1 Book read as v2 and v1", func(t *testing.T) {
		b1 := &webappv1.Book{ObjectMeta: metav1.ObjectMeta{Name: "v1-book"}, Spec: webappv1.BookSpec{Title: "Go", Price: 42}}
		if _, err := env.Books.WebappV1().Books(ns).Create(ctx, b1, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got2, err := env.Books.WebappV2().Books(ns).Get(ctx, "v1-book", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := (webappv2.BookSpec{Title: "Go", Price: webappv2.Price{Amount: "42", Currency: "XXX"}}); !apiequality.Semantic.DeepEqual(got2.Spec, want) {
			t.Errorf("as v2: %+v, want %+v", got2.Spec, want)
		}
		got1, err := env.Books.WebappV1().Books(ns).Get(ctx, "v1-book", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got1.Spec != b1.Spec || len(got1.Annotations) != 0 {
			t.Errorf("as v1: %+v %v, want %+v and no annotation", got1.Spec, got1.Annotations, b1.Spec)
		}
	})

	v2Books := map[string]webappv2.BookSpec{
		"eur":  {Title: "Kubernetes Up and Running", Price: webappv2.Price{Amount: "19.99", Currency: "EUR"}, Authors: []string{"Brendan Burns", "Joe Beda", "Kelsey Hightower"}},
		"jpy":  {Title: "プログラミング言語Go", Price: webappv2.Price{Amount: "3960", Currency: "JPY"}, Authors: []string{"Alan Donovan", "ブライアン・カーニハン"}},
		"kwd":  {Title: "t", Price: webappv2.Price{Amount: "12.750", Currency: "KWD"}},
		"clf":  {Title: "u", Price: webappv2.Price{Amount: "0.9875", Currency: "CLF"}},
		"huge": {Title: "v", Price: webappv2.Price{Amount: "999999999999999", Currency: "USD"}},
	}
	wantV1Price := map[string]int32{"eur": 20, "jpy": 3960, "kwd": 13, "clf": 1, "huge": 2147483647}
	t.Run("v2 Books read as v1 and back", func(t *testing.T) {
		for name, spec := range v2Books {
			if _, err := env.Books.WebappV2().Books(ns).Create(ctx, &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			got1, err := env.Books.WebappV1().Books(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got1.Spec.Price != wantV1Price[name] || got1.Annotations[webappv1.StashAnnotation] == "" {
				t.Errorf("%s as v1: price %d, annotations %v; want %d and the stash", name, got1.Spec.Price, got1.Annotations, wantV1Price[name])
			}
			got2, err := env.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(got2.Spec, spec) || len(got2.Annotations) != 0 {
				t.Errorf("%s back as v2: %+v %v, want %+v", name, got2.Spec, got2.Annotations, spec)
			}
			// A v1 client's write of what it read (a label) keeps the v2 fields.
			got1.Labels = map[string]string{"touched": "v1"}
			if _, err := env.Books.WebappV1().Books(ns).Update(ctx, got1, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			again, err := env.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(again.Spec, spec) {
				t.Errorf("%s after a v1 update: %+v, want %+v", name, again.Spec, spec)
			}
		}
	})

	t.Run("lists of both versions", func(t *testing.T) {
		l1, err := env.Books.WebappV1().Books(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l2, err := env.Books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var n1, n2 []string
		for _, b := range l1.Items {
			n1 = append(n1, b.Name)
		}
		for _, b := range l2.Items {
			n2 = append(n2, b.Name)
		}
		if len(n1) != 2+len(v2Books) || !slices.Equal(n1, n2) {
			t.Errorf("v1 list %q, v2 list %q: want the same %d Books", n1, n2, 2+len(v2Books))
		}
	})

	t.Run("an unpaged v1 list over 3 MiB", func(t *testing.T) { unpagedV1List(t, timing.count) })

	t.Run("a v1 edit of the price", func(t *testing.T) {
		b, err := env.Books.WebappV1().Books(ns).Get(ctx, "eur", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b.Spec.Price = 25
		if _, err := env.Books.WebappV1().Books(ns).Update(ctx, b, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := env.Books.WebappV2().Books(ns).Get(ctx, "eur", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := v2Books["eur"]
		want.Price.Amount = "25" // the v1 price, not the stashed 19.99; the currency and authors stay
		if !apiequality.Semantic.DeepEqual(got.Spec, want) {
			t.Errorf("after a v1 price edit: %+v, want %+v", got.Spec, want)
		}
	})

	t.Run("rotation while converting", func(t *testing.T) {
		// Short lives: the CA is renewed at 8s, each step 1.5s later.
		rot := start(webhook.CertConfig{SecretName: "rotating-certs", CALifetime: 12 * time.Second,
			ServingLifetime: 6 * time.Second, RotationStep: 1500 * time.Millisecond, CheckInterval: 250 * time.Millisecond})
		var reads, failures atomic.Int64
		var firstFailure atomic.Value
		loopCtx, stopLoop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		// The API server keeps what it converted for a resourceVersion, so
		// each round writes: a v1 patch is converted to v1 (to apply it),
		// to v2 (to store it) and back to v1 (the answer).
		for w := range 2 {
			wg.Go(func() {
				for i := 0; loopCtx.Err() == nil; i++ {
					patch := fmt.Sprintf(`{"metadata":{"labels":{"round":"%d"}}}`, i)
					_, err := env.Books.WebappV1().Books(ns).Patch(loopCtx, []string{"eur", "jpy"}[w], types.MergePatchType, []byte(patch), metav1.PatchOptions{})
					if loopCtx.Err() != nil {
						return
					}
					reads.Add(1)
					if err != nil {
						failures.Add(1)
						firstFailure.CompareAndSwap(nil, err.Error())
					}
				}
			})
		}
		// Two CA rotations: each takes its three steps and some serving renewals.
		reviewsBefore := timing.count()
		poll.Eventually(t, "two CA rotations", 200*time.Millisecond, 90*time.Second, func(context.Context) error {
			return poll.Done(rot.CARotations() >= 2, "%d CA rotations, %d steps", rot.CARotations(), rot.Rotations())
		})
		stopLoop()
		wg.Wait()
		t.Logf("CA rotations: %d, rotation steps: %d; v1 patches during them: %d (%d reviews); failed: %d",
			rot.CARotations(), rot.Rotations(), reads.Load(), timing.count()-reviewsBefore, failures.Load())
		if failures.Load() != 0 {
			t.Errorf("%d of %d v1 patches failed during rotation; first: %v", failures.Load(), reads.Load(), firstFailure.Load())
		}
	})
	p50, p99, n := timing.quantiles()
	t.Logf("conversion reviews: %d, p50 %v, p99 %v (webhook side)", n, p50, p99)
}

// reviewTimes records how long the webhook took to answer each review.
type reviewTimes struct {
	mu    sync.Mutex
	times []time.Duration
}

func (r *reviewTimes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, req)
		r.mu.Lock()
		r.times = append(r.times, time.Since(start))
		r.mu.Unlock()
	})
}

func (r *reviewTimes) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.times)
}

func (r *reviewTimes) quantiles() (p50, p99 time.Duration, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.times) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(r.times)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*99/100], len(s)
}

// TestControllerThroughTheWebhook runs the controller (manager.Run, as its
// ServiceAccount with manifests/rbac's roles) against crd.yaml with its
// webhook on 127.0.0.1 (--webhook-loopback): it makes its own certificates
// in the Secret, injects its CA, and then syncs a v2 Book it reads and
// writes as v1, through its own webhook, which its live view shows.
func TestControllerThroughTheWebhook(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	const controllerNS = "book-controller-system"
	cfg := env.ControllerServiceAccountConfig(t)
	env.WaitForAccess(t, cfg,
		authorizationv1.ResourceAttributes{Verb: "update", Resource: "secrets", Namespace: controllerNS, Name: webhook.DefaultSecretName},
		authorizationv1.ResourceAttributes{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: webhook.DefaultCRDName})
	probe, uiAddr := framework.FreeAddr(t), framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, RESTConfig: cfg, ProbeAddr: probe, UIAddr: uiAddr,
		Webhook: manager.Webhook{Addr: "127.0.0.1:0", Loopback: true, Namespace: controllerNS}})

	book := &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: "priced"},
		Spec: webappv2.BookSpec{Title: "t", Price: webappv2.Price{Amount: "19.99", Currency: "EUR"}, Authors: []string{"A"}}}
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, book, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "priced", metav1.ConditionTrue, "")
	got, err := env.Books.WebappV2().Books(ns).Get(ctx, "priced", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(got.Spec, book.Spec) {
		t.Errorf("after the controller's v1 status write: %+v, want %+v", got.Spec, book.Spec)
	}
	secret, err := env.Kube.CoreV1().Secrets(controllerNS).Get(ctx, webhook.DefaultSecretName, metav1.GetOptions{})
	if err != nil || secret.Labels[webhook.ManagedLabel] == "" {
		t.Fatalf("the webhook's Secret: %v %v", err, secret.GetLabels())
	}
	framework.Eventually(t, "/readyz", framework.Readyz(probe))
	t.Run("the live view shows the conversions", func(t *testing.T) { checkConversionsShown(t, uiAddr, ns, "priced") })
}

// bigListBooks is how many Books unpagedV1List creates: with the longest
// title and the most authors v2 allows, their v2 list is over 3 MiB.
const bigListBooks = 1600

// unpagedV1List: a v1 list without a limit (kubectl --chunk-size=0, a
// client-go List without Limit) of Books whose v2 list is over 3 MiB, the
// webhook's limit on a review's body, works. apiextensions-apiserver could
// send a whole list in one review; kube-apiserver 1.37.2 converts each
// Book as it is written (one review per create here) and serves the list
// without a review at all. It logs the reviews the list took (reviews
// counts them all so far).
func unpagedV1List(t *testing.T, reviews func() int) {
	ns := env.Namespace(t)
	authors := make([]string, 16)
	for i := range authors {
		authors[i] = strings.Repeat(string(rune('a'+i)), 128)
	}
	framework.Parallel(t, bigListBooks, 16, func(ctx context.Context, i int) error {
		b := &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: framework.BookName("big", i)},
			Spec: webappv2.BookSpec{Title: strings.Repeat("t", 256), Price: webappv2.Price{Amount: "19.99", Currency: "EUR"}, Authors: authors}}
		_, err := env.Books.WebappV2().Books(ns).Create(ctx, b, metav1.CreateOptions{})
		return err
	})
	l2, err := env.Books.WebappV2().Books(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(l2)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) <= 3<<20 {
		t.Fatalf("the v2 list is %d bytes: make the Books larger, the review must be over 3 MiB", len(raw))
	}
	before := reviews()
	l1, err := env.Books.WebappV1().Books(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("an unpaged v1 list of %d Books (%.1f MiB as v2): %v", bigListBooks, float64(len(raw))/(1<<20), err)
	}
	took := reviews() - before
	if len(l1.Items) != bigListBooks {
		t.Errorf("the v1 list has %d Books, want %d", len(l1.Items), bigListBooks)
	}
	t.Logf("an unpaged v1 list of %d Books, %.1f MiB as v2: %d ConversionReviews", len(l1.Items), float64(len(raw))/(1<<20), took)
}
