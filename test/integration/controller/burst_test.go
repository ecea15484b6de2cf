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

package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestBurstMakesOneCreateAndOneStatusWritePerBook: the Book and ConfigMap
// watches race each other, and under load the event of a Book's status write
// often arrives before the add event of the ConfigMap created just before
// it. Here the ConfigMap watch lags by 300 ms, so that order is the rule.
// Each Book must still cost exactly one ConfigMap create and one status
// write: no create answered 409 AlreadyExists and read back, no status write
// repeated. That is the own-writes layer's work (pkg/controller/ownwrites.go);
// the test also runs without it and logs what the burst costs then.
//
// Two changes by somebody else once every Book is Ready are the markers:
// each informer hands on its watch's events in order, so once the
// controller has acted on a Book edit and on a ConfigMap edit made after
// every write of the burst, it has seen the events of all of them, and a
// sync they caused was queued before the markers'. The markers cost one
// ConfigMap update and one status write (the edited Book), and one
// ConfigMap update (the repair).
func TestBurstMakesOneCreateAndOneStatusWritePerBook(t *testing.T) {
	t.Parallel()
	for _, tracked := range []bool{true, false} {
		t.Run(fmt.Sprintf("own-writes=%v", tracked), func(t *testing.T) {
			t.Parallel()
			const n = 300
			w := burstWrites(t, n, tracked)
			t.Logf("for %d Books and two edits with own-writes %v: %d ConfigMap creates, %d updates, %d status writes, %d reads of other ConfigMaps",
				n, tracked, w.creates, w.updates, w.statusWrites, len(w.singleReads))
			if tracked && (w.creates != n || w.updates != 2 || w.statusWrites != n+1 || len(w.singleReads) != 0) {
				t.Errorf("for %d Books and two edits: %d ConfigMap creates, %d updates, %d status writes, reads of other ConfigMaps %v; want %d, 2, %d, none",
					n, w.creates, w.updates, w.statusWrites, w.singleReads, n, n+1)
			}
		})
	}
}

// burstCounts are the controller's requests for a burst.
type burstCounts struct {
	creates, updates, statusWrites int
	singleReads                    []string
}

// burstWrites creates n Books for a controller whose ConfigMap watch lags,
// waits for them and for the two markers, and counts its requests.
func burstWrites(t *testing.T, n int, tracked bool) burstCounts {
	ns := env.Namespace(t)
	var counter framework.RequestCounter
	opts := framework.ControllerOptions{Namespace: ns, Workers: 64,
		RESTConfig: framework.DelayWatch(counter.Wrap(env.ControllerServiceAccountConfig(t)), "configmaps", 300*time.Millisecond)}
	if tracked {
		opts.On.OwnWrites = true
	} else {
		opts.Off.OwnWrites = true
	}
	env.StartController(t, opts)

	books := env.CreateBooks(t, ns, "book", n)
	env.WaitForBooksReady(t, ns, n)
	editBook(t, ns, books[0].Name, "edited by somebody else")
	env.WaitForConfigMap(t, ns, books[0].Name, "to hold the edited title", func(cm *corev1.ConfigMap) bool {
		return cm.Data[controller.TitleKey] == "edited by somebody else"
	})
	editConfigMap(t, ns, books[1].Name, "tampered")
	env.WaitForConfigMap(t, ns, books[1].Name, "to be repaired", func(cm *corev1.ConfigMap) bool {
		return cm.Data[controller.TitleKey] == books[1].Spec.Title
	})
	env.WaitForReady(t, ns, books[0].Name, metav1.ConditionTrue, controller.ReasonConfigMapReady)

	configMaps := "/api/v1/namespaces/" + ns + "/configmaps"
	var w burstCounts
	for _, r := range counter.Requests() {
		switch {
		case r.Method == http.MethodPost && r.Path == configMaps:
			w.creates++
		case r.Method == http.MethodPut && strings.HasPrefix(r.Path, configMaps+"/"):
			w.updates++
		case r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/status"):
			w.statusWrites++
		case r.Method == http.MethodGet && strings.HasPrefix(r.Path, configMaps+"/") &&
			r.Path != configMaps+"/"+books[0].Name && r.Path != configMaps+"/"+books[1].Name:
			w.singleReads = append(w.singleReads, r.Path) // the markers' may be read
		}
	}
	return w
}

// editBook sets the title of the Book ns/name, as a user would.
func editBook(t *testing.T, ns, name, title string) {
	t.Helper()
	books := env.Books.WebappV2().Books(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := books.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.Spec.Title = title
		_, err = books.Update(context.Background(), b, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// editConfigMap sets the title in the ConfigMap ns/name, as a user would.
func editConfigMap(t *testing.T, ns, name, title string) {
	t.Helper()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Data[controller.TitleKey] = title
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
