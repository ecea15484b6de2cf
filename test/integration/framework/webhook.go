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

package framework

import (
	"context"
	"fmt"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// BookCRD is the name of the Book CustomResourceDefinition.
const BookCRD = "books.webapp.ydzs.io"

// LastV1Release is the last release that serves webapp.ydzs.io/v1 alone, and
// LastV1Commit the commit CHANGELOG.md gives for it (the upgrade test checks
// that the two agree): the old controller of the upgrade test, and the v1
// figure test/bench's v1-backlog phase measures.
const (
	LastV1Release = "v0.9.0"
	LastV1Commit  = "b8d669c"
)

// V1OnlyCRD is the Book CRD as the releases before v2 installed it (v0.9.0,
// CHANGELOG.md's last v1-only release): manifests/crd.yaml's v1 alone,
// stored and not deprecated, without conversion. Tests of the storage
// migration start from it, with Books stored as v1.
func V1OnlyCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := LoadCRD()
	if err != nil {
		return nil, err
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1" {
			v.Storage, v.Deprecated, v.DeprecationWarning = true, false, nil
			crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v}
			crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
			return crd, nil
		}
	}
	return nil, fmt.Errorf("manifests/%s has no version v1", CRDFile)
}

// CreateAllV1 is CreateAll for v1 Books, as the clients of the releases
// before v2 create them.
func (e *Env) CreateAllV1(t testing.TB, books []*webappv1.Book) []*webappv1.Book {
	t.Helper()
	out := make([]*webappv1.Book, len(books))
	Parallel(t, len(books), CreateWidth, func(ctx context.Context, i int) error {
		client := e.Books.WebappV1().Books(books[i].Namespace)
		var err error
		out[i], err = createOnce(ctx, books[i], client.Create, client.Get)
		return err
	})
	return out
}

// BooksReadyV1 is BooksReady through v1, for a CRD that serves v1 alone
// (V1OnlyCRD, the releases before v2). v1's status is v2's.
func (e *Env) BooksReadyV1(ns string, n int) poll.Check {
	return booksReady(ns, n, func(ctx context.Context, ns string) ([]string, int, error) {
		list, err := e.Books.WebappV1().Books(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, 0, fmt.Errorf("listing the Books in %s as v1: %w", ns, err)
		}
		books := make([]webappv2.Book, len(list.Items))
		for i := range list.Items {
			books[i] = *statusAsV2(&list.Items[i])
		}
		bad, total := notReady(books)
		return bad, total, nil
	})
}

// IsReadyV1 is IsReady for a Book read through v1.
func IsReadyV1(b *webappv1.Book) bool { return IsReady(statusAsV2(b)) }

// statusAsV2 is b's metadata and status as a v2 Book, for the checks of
// readiness, which read only those: v1's status is v2's.
func statusAsV2(b *webappv1.Book) *webappv2.Book {
	return &webappv2.Book{ObjectMeta: b.ObjectMeta, Status: webappv2.BookStatus(b.Status)}
}

// SwitchCRD gives the installed Book CRD the spec of manifests/<file>, as
// `kubectl apply` of another release's CRD does.
func (e *Env) SwitchCRD(t testing.TB, file string) {
	t.Helper()
	if err := SwitchCRDFile(context.Background(), e.Extensions, file); err != nil {
		t.Fatal(err)
	}
}

// SwitchCRDFile is SwitchCRD for a program (test/bench's -migration): the
// installed Book CRD gets the spec of manifests/<file>.
func SwitchCRDFile(ctx context.Context, client apiextensionsclient.Interface, file string) error {
	want, err := LoadCRDFile(file)
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec = want.Spec
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("switching the Book CRD to manifests/%s: %w", file, err)
	}
	return nil
}

// StartWebhookOnly runs bin (this build of the controller) with
// --webhook-only and --webhook-loopback, so that the API server converts
// Books through it, and returns once it is ready and a v1 list of Books
// works. It is stopped at the end of the test.
func (e *Env) StartWebhookOnly(t testing.TB, bin string) *Process {
	t.Helper()
	probe := FreeAddr(t)
	p := StartProcess(t, "webhook-only", bin, "--kubeconfig", e.Cluster.KubeconfigPath(),
		"--webhook-only", "--webhook-loopback", "--webhook-bind-address", FreeAddr(t),
		"--health-probe-bind-address", probe, "--metrics-bind-address", "0")
	Eventually(t, "the webhook-only process to be ready", func(ctx context.Context) error {
		if !p.Running() {
			t.Fatalf("the webhook-only process exited:\n%s", p.Tail(30))
		}
		return Readyz(probe)(ctx)
	})
	Eventually(t, "a v1 list of Books through the webhook", e.V1ListWorks(""))
	return p
}

// V1ListWorks is a check that Books in ns ("" for all) can be listed as v1,
// which needs the conversion webhook once the CRD stores v2.
func (e *Env) V1ListWorks(ns string) poll.Check {
	return func(ctx context.Context) error {
		if _, err := e.Books.WebappV1().Books(ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			return fmt.Errorf("listing Books as v1: %w", err)
		}
		return nil
	}
}

// StoredVersionsAre is a check that the CRD of that name has exactly want,
// in that order, in its status.storedVersions.
func (e *Env) StoredVersionsAre(crd string, want ...string) poll.Check {
	return func(ctx context.Context) error {
		got, err := e.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.Equal(got.Status.StoredVersions, want) {
			return fmt.Errorf("%s's storedVersions are %v, want %v", crd, got.Status.StoredVersions, want)
		}
		return nil
	}
}
