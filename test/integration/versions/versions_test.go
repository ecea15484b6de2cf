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
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

// v1DeprecationWarning is what the API server must say with every v1 request.
const v1DeprecationWarning = "webapp.ydzs.io/v1 Book is deprecated; use webapp.ydzs.io/v2"

// TestInvalidBooksAreRejected sends every invalid example of both versions
// to the API server, as kubectl would, and wants each refused with an error
// naming its field.
func TestInvalidBooksAreRejected(t *testing.T) {
	t.Parallel()
	t.Run("v1", func(t *testing.T) { env.RejectsInvalidExamples(t, "manifests/examples/invalid", 8) })
	t.Run("v2", func(t *testing.T) { env.RejectsInvalidExamples(t, "manifests/examples/v2/invalid", 12) })
}

// TestV2BooksAreStoredAsV2 creates every valid v2 example under strict field
// validation and wants it back, through the generated v2 clientset, as it
// was sent, and in etcd as a v2 object: v2 is the storage version.
func TestV2BooksAreStoredAsV2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	crd, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "books."+webappv2.GroupName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v2"}) {
		t.Errorf("status.storedVersions = %q, want [v2]", crd.Status.StoredVersions)
	}

	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{env.Cluster.EtcdURL()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()

	dyn := dynamic.NewForConfigOrDie(env.RESTConfig())
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "manifests", "examples", "v2", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no v2 examples (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := &webappv2.Book{}
			if err := yaml.UnmarshalStrict(data, want); err != nil {
				t.Fatal(err)
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(data, &obj.Object); err != nil {
				t.Fatal(err)
			}
			if _, err := dyn.Resource(webappv2.SchemeGroupVersion.WithResource("books")).Namespace(ns).
				Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
				t.Fatalf("creating %s: %v", file, err)
			}
			got, err := env.Books.WebappV2().Books(ns).Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
				t.Errorf("spec read back %+v, want %+v", got.Spec, want.Spec)
			}

			key := "/registry/" + webappv2.GroupName + "/books/" + ns + "/" + want.Name
			resp, err := etcd.Get(ctx, key)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("etcd key %s: %d values, %v", key, len(resp.Kvs), err)
			}
			var stored struct {
				APIVersion string `json:"apiVersion"`
			}
			if err := json.Unmarshal(resp.Kvs[0].Value, &stored); err != nil || stored.APIVersion != webappv2.SchemeGroupVersion.String() {
				t.Errorf("etcd holds %s as %q (%v), want %s", key, stored.APIVersion, err, webappv2.SchemeGroupVersion)
			}
		})
	}
}

// TestPrinterColumns asks for Books as kubectl get does (a server-side
// Table) and wants each version's columns, and the v2 sample's cells.
func TestPrinterColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	sample := &webappv2.Book{
		ObjectMeta: metav1.ObjectMeta{Name: "sample"},
		Spec: webappv2.BookSpec{Title: "Kubernetes Up and Running",
			Price: webappv2.Price{Amount: "19.99", Currency: "EUR"}, Authors: []string{"Brendan Burns"}},
	}
	if _, err := env.Books.WebappV2().Books(ns).Create(ctx, sample, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	v2Table := table(t, "v2", ns)
	if want := []string{"Name", "Title", "Price", "Currency", "Ready", "Age"}; !slices.Equal(columnNames(v2Table), want) {
		t.Errorf("v2 columns %q, want %q", columnNames(v2Table), want)
	}
	if len(v2Table.Rows) != 1 {
		t.Fatalf("v2 table has %d rows, want 1", len(v2Table.Rows))
	}
	if cells := v2Table.Rows[0].Cells; len(cells) < 4 || cells[0] != "sample" || cells[1] != sample.Spec.Title || cells[2] != "19.99" || cells[3] != "EUR" {
		t.Errorf("v2 row %v, want sample, %q, 19.99, EUR", cells, sample.Spec.Title)
	}

	// A v1 table of an empty namespace needs no conversion, so no webhook.
	v1Table := table(t, "v1", env.Namespace(t))
	if want := []string{"Name", "Title", "Price", "Ready", "Age"}; !slices.Equal(columnNames(v1Table), want) {
		t.Errorf("v1 columns %q, want %q", columnNames(v1Table), want)
	}
}

func table(t *testing.T, version, ns string) *metav1.Table {
	t.Helper()
	cfg := env.RESTConfig()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := cfg.Host + "/apis/" + webappv2.GroupName + "/" + version + "/namespaces/" + ns + "/books"
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("listing %s Books as a table: %v", version, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("listing %s Books as a table: %s %s (%v)", version, resp.Status, body, err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil {
		t.Fatalf("decoding the %s table: %v", version, err)
	}
	return &tbl
}

func columnNames(tbl *metav1.Table) []string {
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

// TestV1IsDeprecated: every v1 request is answered with the deprecation
// warning, no v2 request is.
func TestV1IsDeprecated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	for _, c := range []struct {
		version string
		want    []string
	}{
		{"v1", []string{v1DeprecationWarning}},
		{"v2", nil},
	} {
		warnings := &recorder{}
		cfg := env.RESTConfig()
		cfg.WarningHandler = warnings
		dyn := dynamic.NewForConfigOrDie(cfg)
		if _, err := dyn.Resource(webappv2.SchemeGroupVersion.WithResource("books").GroupResource().WithVersion(c.version)).
			Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("listing %s Books: %v", c.version, err)
		}
		if got := warnings.all(); !slices.Equal(got, c.want) {
			t.Errorf("%s list: warnings %q, want %q", c.version, got, c.want)
		}
	}
}

// recorder keeps the warnings the API server sends.
type recorder struct {
	mu       sync.Mutex
	warnings []string
}

func (r *recorder) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, text)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.warnings)
}
