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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/webhook"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestWhatARewriteConverts keeps docs/api-versions.md's "Why 9 reviews a
// Book" true: kube-controller-manager's rewrite of one Book stored as v1
// and created through v1 (an empty merge patch at v2, as
// pkg/controller/storageversionmigrator sends it) costs 1 conversion to v2
// and 7 to v1 (6 in the request, 1 for the v1 watch cache). It flips the CRD's storage version to v1 and back, so it
// runs alone (not parallel) and puts storedVersions back to [v2].
func TestWhatARewriteConverts(t *testing.T) {
	ctx := t.Context()
	ns := env.Namespace(t)
	reviews := startRecordingWebhook(t, env.Namespace(t))
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{env.Cluster.EtcdURL()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	t.Cleanup(func() { restoreV2Storage(t) })

	setStorageVersion(t, "v1")
	book := createStoredAs(t, etcd, ns, "v1")
	flipped := reviews.mark()
	setStorageVersion(t, "v2")
	createStoredAs(t, etcd, ns, "v2") // the API server writes v2 again
	// The change of the CRD made a new storage, whose v2 watch cache lists
	// the Book stored as v1 and converts it when it starts. It starts beside
	// the requests, not before them: counted after the mark, its conversion
	// would look like the rewrite's (CI saw 2 to v2 once).
	framework.Eventually(t, "the new storage's v2 watch cache to list the Book stored as v1", func(context.Context) error {
		if reviews.count(flipped, ns+"/"+book, webappv2.SchemeGroupVersion.String()) == 0 {
			return fmt.Errorf("no conversion of %s to v2 since the storage version went back to v2", book)
		}
		return nil
	})

	dyn := dynamic.NewForConfigOrDie(env.RESTConfig()).Resource(webappv2.SchemeGroupVersion.WithResource("books")).Namespace(ns)
	current, err := dyn.Get(ctx, book, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := reviews.mark()
	patch := fmt.Sprintf(`{"apiVersion":%q,"kind":"Book","metadata":{"resourceVersion":%q}}`,
		webappv2.SchemeGroupVersion.String(), current.GetResourceVersion())
	if _, err := dyn.Patch(ctx, book, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "storage-version-migrator"}); err != nil {
		t.Fatal(err)
	}
	// A Book created after it: once the v1 watch cache has converted this
	// one, it has converted the rewrite's event, which came first.
	marker := &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: "marker"},
		Spec: webappv2.BookSpec{Title: "t", Price: webappv2.Price{Amount: "1", Currency: "XXX"}}}
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// For a while after a change of the CRD, the storage it replaced, with
	// its watch caches, lives on beside the new one: each v1 watch cache
	// converts each event, the marker's after the rewrite's. Once every
	// cache has converted the marker, the counts are final.
	framework.Eventually(t, "the rewrite's conversions, as docs/api-versions.md counts them", func(context.Context) error {
		caches := reviews.count(from, ns+"/marker", webappv1.SchemeGroupVersion.String())
		toV2 := reviews.count(from, ns+"/"+book, webappv2.SchemeGroupVersion.String())
		toV1 := reviews.count(from, ns+"/"+book, webappv1.SchemeGroupVersion.String())
		if caches == 0 || toV2 != 1 || toV1 != 6+caches {
			return fmt.Errorf("the rewrite converted the Book %d times to v2 and %d to v1, and %d v1 watch caches the marker; "+
				"docs/api-versions.md says 1 to v2, and to v1 6 plus 1 for each v1 watch cache; the reviews since the patch: %s",
				toV2, toV1, caches, reviews.since(from))
		}
		t.Logf("one rewrite: %d conversion to v2, %d to v1 (%d v1 watch caches)", toV2, toV1, caches)
		return nil
	})
}

// recordingObserver keeps every review the webhook answers.
type recordingObserver struct {
	mu      sync.Mutex
	reviews []webhook.Review
}

func (r *recordingObserver) Reviewed(rv webhook.Review) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reviews = append(r.reviews, rv)
}

// mark is where the reviews from now on start.
func (r *recordingObserver) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reviews)
}

// count is how many reviews since from converted name to desired.
func (r *recordingObserver) count(from int, name, desired string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rv := range r.reviews[from:] {
		if rv.DesiredAPIVersion == desired && slices.Contains(rv.Names, name) {
			n++
		}
	}
	return n
}

// since lists the reviews from from on, when each arrived and what it
// converted, for a failure's message.
func (r *recordingObserver) since(from int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rv := range r.reviews[from:] {
		fmt.Fprintf(&b, "\n  %s %v to %s", rv.At.Format("15:04:05.000"), rv.Names, rv.DesiredAPIVersion)
	}
	return b.String()
}

// startRecordingWebhook serves the conversion webhook in this process with
// its certificates' Secret in certNS, and points the CRD at it.
func startRecordingWebhook(t *testing.T, certNS string) *recordingObserver {
	t.Helper()
	obs := &recordingObserver{}
	handler := webhook.NewHandler(webhook.NewMetrics(prometheus.NewRegistry()), 0)
	handler.SetObserver(obs)
	var certs *webhook.Certs
	srv, err := webhook.Listen("127.0.0.1:0", handler.Mux(), func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return certs.GetCertificate(h)
	}, webhook.DefaultTimeouts)
	if err != nil {
		t.Fatal(err)
	}
	certs, err = webhook.NewCerts(webhook.CertConfig{Kube: env.Kube, CRDs: env.Extensions, Namespace: certNS,
		LoopbackURL: fmt.Sprintf("https://%s%s", srv.Addr(), webhook.Path)})
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(t.Context())
	t.Cleanup(srv.Stop)
	if err := certs.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return obs
}

// setStorageVersion makes version the CRD's storage version.
func setStorageVersion(t *testing.T, version string) {
	t.Helper()
	updateCRD(t, "making "+version+" the storage version", func(crd *apiextensionsv1.CustomResourceDefinition) {
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == version
		}
	})
}

// updateCRD applies change to the installed Book CRD, retrying on
// conflicts; what says what the change is, for a failure.
func updateCRD(t *testing.T, what string, change func(*apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	crds := env.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(context.Background(), framework.BookCRD, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(crd)
		_, err = crds.Update(context.Background(), crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// createStoredAs creates Books through v1 until the API server stores one
// as version (it takes a CRD's new storage version up soon after the
// change), and returns its name.
func createStoredAs(t *testing.T, etcd *clientv3.Client, ns, version string) string {
	t.Helper()
	var name string
	i := 0
	framework.Eventually(t, "a Book stored as "+version, func(ctx context.Context) error {
		i++
		name = fmt.Sprintf("stored-%s-%d", version, i)
		b := &webappv1.Book{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: webappv1.BookSpec{Title: "t", Price: 3}}
		if _, err := env.Books.WebappV1().Books(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			return err
		}
		resp, err := etcd.Get(ctx, "/registry/"+webappv1.GroupName+"/books/"+ns+"/"+name)
		if err != nil || len(resp.Kvs) != 1 {
			return fmt.Errorf("etcd: %d values, %v", len(resp.Kvs), err)
		}
		var stored struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil {
			return err
		}
		if stored.APIVersion != webappv1.GroupName+"/"+version {
			return fmt.Errorf("stored as %s", stored.APIVersion)
		}
		return nil
	})
	return name
}

// restoreV2Storage puts the CRD back as the other tests expect it: v2
// stored, storedVersions [v2]. The Books of this test are deleted with its
// namespace; the v1-stored one was rewritten as v2.
func restoreV2Storage(t *testing.T) {
	setStorageVersion(t, "v2")
	crds := env.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(context.Background(), framework.BookCRD, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Status.StoredVersions = []string{"v2"}
		_, err = crds.UpdateStatus(context.Background(), crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Errorf("putting storedVersions back to [v2]: %v", err)
	}
}
