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

package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

func v2Book(name string) *webappv2.Book {
	return &webappv2.Book{
		TypeMeta:   metav1.TypeMeta{APIVersion: v2Version, Kind: "Book"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: webappv2.BookSpec{Title: "Kubernetes Up and Running",
			Price: webappv2.Price{Amount: "19.99", Currency: "EUR"}, Authors: []string{"Brendan Burns", "Joe Beda"}},
		Status: webappv2.BookStatus{ObservedGeneration: 3, ConfigMapName: name},
	}
}

func raw(t *testing.T, obj any) runtime.RawExtension {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: data}
}

func reviewBody(t *testing.T, desired string, objs ...runtime.RawExtension) []byte {
	t.Helper()
	data, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "uid-1", DesiredAPIVersion: desired, Objects: objs},
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// post sends body to h and returns the status, the review (if any) and the
// raw response.
func post(t *testing.T, h http.Handler, body []byte) (int, *apiextensionsv1.ConversionReview, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var review apiextensionsv1.ConversionReview
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
			t.Fatalf("response is not a review: %v: %s", err, rec.Body)
		}
		return rec.Code, &review, rec.Body.String()
	}
	return rec.Code, nil, rec.Body.String()
}

func newTestHandler() (*Handler, *Metrics) {
	m := NewMetrics(prometheus.NewRegistry())
	return NewHandler(m, 0), m
}

func TestConvertsBothWays(t *testing.T) {
	h, m := newTestHandler()
	books := []*webappv2.Book{v2Book("a"), v2Book("b")}
	books[1].Spec.Price = webappv2.Price{Amount: "100", Currency: "XXX"}
	books[1].Spec.Authors = nil

	code, review, body := post(t, h, reviewBody(t, v1Version, raw(t, books[0]), raw(t, books[1])))
	if code != http.StatusOK || review.Response.Result.Status != metav1.StatusSuccess || review.Response.UID != "uid-1" {
		t.Fatalf("v2->v1: %d %s", code, body)
	}
	if review.Kind != "ConversionReview" || len(review.Response.ConvertedObjects) != 2 {
		t.Fatalf("v2->v1: %s", body)
	}
	var v1s []runtime.RawExtension
	for i, obj := range review.Response.ConvertedObjects {
		var got webappv1.Book
		if err := json.Unmarshal(obj.Raw, &got); err != nil {
			t.Fatal(err)
		}
		var want webappv1.Book
		_ = want.ConvertFrom(books[i])
		want.TypeMeta = metav1.TypeMeta{APIVersion: v1Version, Kind: "Book"}
		if !apiequality.Semantic.DeepEqual(&got, &want) {
			t.Errorf("v2->v1 of %s: got %+v, want %+v", books[i].Name, got, want)
		}
		v1s = append(v1s, obj)
	}
	if _, ok := mustBook1(t, v1s[0]).Annotations[webappv1.StashAnnotation]; !ok {
		t.Errorf("a EUR Book read as v1 has no %s", webappv1.StashAnnotation)
	}

	// And back: the same v2 Books.
	code, review, body = post(t, h, reviewBody(t, v2Version, v1s...))
	if code != http.StatusOK || review.Response.Result.Status != metav1.StatusSuccess {
		t.Fatalf("v1->v2: %d %s", code, body)
	}
	for i, obj := range review.Response.ConvertedObjects {
		var got webappv2.Book
		if err := json.Unmarshal(obj.Raw, &got); err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(&got, books[i]) {
			t.Errorf("v2->v1->v2 of %s: got %+v, want %+v", books[i].Name, got, books[i])
		}
	}

	// A Book already of the desired version comes back as sent.
	same := raw(t, books[0])
	_, review, _ = post(t, h, reviewBody(t, v2Version, same))
	if !bytes.Equal(review.Response.ConvertedObjects[0].Raw, same.Raw) {
		t.Errorf("a v2 Book converted to v2 changed: %s", review.Response.ConvertedObjects[0].Raw)
	}
	if got := testutil.ToFloat64(m.reviews.WithLabelValues(ResultSuccess)); got != 3 {
		t.Errorf("%s reviews = %v, want 3", ResultSuccess, got)
	}
	if got := testutil.CollectAndCount(m.duration); got != 1 {
		t.Errorf("duration histogram: %d series", got)
	}
	// Two Books to v1, then two and the one already v2 to v2.
	for to, want := range map[string]float64{"v1": 2, "v2": 3} {
		if got := testutil.ToFloat64(m.objects.WithLabelValues(to)); got != want {
			t.Errorf("objects converted to %s = %v, want %v", to, got, want)
		}
	}
}

func mustBook1(t *testing.T, obj runtime.RawExtension) *webappv1.Book {
	t.Helper()
	var b webappv1.Book
	if err := json.Unmarshal(obj.Raw, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

// TestRefusesReviewsItCannotConvertWhole: a review with one bad object
// converts none, and the message names the object and what is wrong.
func TestRefusesReviewsItCannotConvertWhole(t *testing.T) {
	good := v2Book("good")
	for _, c := range []struct {
		name    string
		desired string
		obj     string
		want    []string
	}{
		{"unknown desired version", "webapp.ydzs.io/v3", `{}`, []string{`desiredAPIVersion "webapp.ydzs.io/v3"`}},
		{"desired version of another group", "apps/v1", `{}`, []string{`desiredAPIVersion "apps/v1"`}},
		{"another kind", v1Version, `{"apiVersion":"webapp.ydzs.io/v2","kind":"Magazine","metadata":{"namespace":"ns","name":"m"}}`,
			[]string{"objects[1] ns/m", `kind "Magazine"`}},
		{"another group", v1Version, `{"apiVersion":"apps/v1","kind":"Book","metadata":{"namespace":"ns","name":"x"}}`,
			[]string{"objects[1] ns/x", `apiVersion "apps/v1"`}},
		{"another version", v1Version, `{"apiVersion":"webapp.ydzs.io/v3","kind":"Book","metadata":{"namespace":"ns","name":"x"}}`,
			[]string{"objects[1] ns/x", `apiVersion "webapp.ydzs.io/v3"`}},
		{"a field of the wrong type", v2Version, `{"apiVersion":"webapp.ydzs.io/v1","kind":"Book","metadata":{"namespace":"ns","name":"p"},"spec":{"title":"t","price":"ten"}}`,
			[]string{"objects[1] ns/p", "spec.price", "int32"}},
		{"a v2 price that is not an object", v1Version, `{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","metadata":{"namespace":"ns","name":"q"},"spec":{"title":"t","price":5}}`,
			[]string{"objects[1] ns/q", "spec.price"}},
		{"not an object", v1Version, `[1,2]`, []string{"objects[1] (unnamed)", "not a JSON object"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, m := newTestHandler()
			code, review, body := post(t, h, reviewBody(t, c.desired, raw(t, good), runtime.RawExtension{Raw: []byte(c.obj)}))
			if code != http.StatusOK {
				t.Fatalf("status %d %s, want 200 with a Failure", code, body)
			}
			r := review.Response
			if r.Result.Status != metav1.StatusFailure || r.UID != "uid-1" || len(r.ConvertedObjects) != 0 {
				t.Fatalf("response %s, want a Failure with no objects", body)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Result.Message, w) {
					t.Errorf("message %q does not say %q", r.Result.Message, w)
				}
			}
			if strings.Contains(r.Result.Message, "\n") {
				t.Errorf("message %q is on several lines", r.Result.Message)
			}
			if got := testutil.ToFloat64(m.reviews.WithLabelValues(ResultFailure)); got != 1 {
				t.Errorf("%s reviews = %v, want 1", ResultFailure, got)
			}
			if got := testutil.CollectAndCount(m.objects); got != 2 || testutil.ToFloat64(m.objects.WithLabelValues("v1"))+testutil.ToFloat64(m.objects.WithLabelValues("v2")) != 0 {
				t.Errorf("objects counted for a refused review")
			}
		})
	}
}

// TestRefusesWhatIsNotAReview: a 4xx with a one-line message.
func TestRefusesWhatIsNotAReview(t *testing.T) {
	for _, c := range []struct {
		name, method, contentType, body string
		code                            int
		want                            string
	}{
		{"malformed JSON", http.MethodPost, "application/json", `{"request":`, http.StatusBadRequest, "not a ConversionReview"},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`, http.StatusBadRequest, "no request"},
		{"no uid", http.MethodPost, "application/json", `{"request":{"desiredAPIVersion":"webapp.ydzs.io/v1","objects":[]}}`, http.StatusBadRequest, "no uid"},
		{"GET", http.MethodGet, "", "", http.StatusMethodNotAllowed, "only POST"},
		{"YAML", http.MethodPost, "application/yaml", "request: {}", http.StatusUnsupportedMediaType, "only application/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, m := newTestHandler()
			req := httptest.NewRequest(c.method, Path, strings.NewReader(c.body))
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			msg := strings.TrimSuffix(rec.Body.String(), "\n")
			if rec.Code != c.code || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("%d %q, want %d and one line with %q", rec.Code, msg, c.code, c.want)
			}
			if got := testutil.ToFloat64(m.reviews.WithLabelValues(ResultBadRequest)); got != 1 {
				t.Errorf("%s reviews = %v, want 1", ResultBadRequest, got)
			}
		})
	}
}

// countingReader is an endless body that counts what is read of it.
type countingReader struct{ n int64 }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	r.n += int64(len(p))
	return len(p), nil
}

// TestRefusesLargeBodies: a declared 10 MiB body is refused unread; an
// undeclared one is cut at the limit.
func TestRefusesLargeBodies(t *testing.T) {
	h, _ := newTestHandler()
	body := &countingReader{}
	req := httptest.NewRequest(http.MethodPost, Path, io.LimitReader(body, 10<<20))
	req.ContentLength = 10 << 20
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || body.n != 0 {
		t.Errorf("declared 10 MiB: %d %q after reading %d bytes, want 413 unread", rec.Code, rec.Body, body.n)
	}

	body = &countingReader{}
	req = httptest.NewRequest(http.MethodPost, Path, io.LimitReader(body, 10<<20))
	req.ContentLength = -1 // chunked
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || body.n > DefaultMaxBodyBytes+64<<10 {
		t.Errorf("chunked 10 MiB: %d %q after reading %d bytes, want 413 near the limit", rec.Code, rec.Body, body.n)
	}
}

// TestRecoversFromAPanic: a 500 that says so, and the next review served.
func TestRecoversFromAPanic(t *testing.T) {
	h, m := newTestHandler()
	h.convert = func([]byte, string) ([]byte, error) { panic("boom") }
	code, _, body := post(t, h, reviewBody(t, v1Version, raw(t, v2Book("a"))))
	if code != http.StatusInternalServerError || !strings.Contains(body, "boom") {
		t.Errorf("%d %q, want 500 naming the panic", code, body)
	}
	if got := testutil.ToFloat64(m.reviews.WithLabelValues(ResultPanic)); got != 1 {
		t.Errorf("%s reviews = %v, want 1", ResultPanic, got)
	}
	h.convert = convertObject
	if code, _, body := post(t, h, reviewBody(t, v1Version, raw(t, v2Book("a")))); code != http.StatusOK {
		t.Errorf("after the panic: %d %s", code, body)
	}
}

// TestServerDropsSlowClients: a client that sends half a body and stalls
// is cut off by the read timeout, not held forever.
func TestServerDropsSlowClients(t *testing.T) {
	ca, err := newCA(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := newServing(ca, time.Now(), time.Hour, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.certPEM, kp.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := newTestHandler()
	srv, err := Listen("127.0.0.1:0", h.Mux(), func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil },
		Timeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Write: time.Second, Idle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(t.Context())
	defer srv.Stop()
	if err := srv.Ready(); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}

	// A whole review is answered.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 10 * time.Second}
	resp, err := client.Post("https://"+srv.Addr().String()+Path, "application/json", bytes.NewReader(reviewBody(t, v1Version, raw(t, v2Book("a")))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a whole review: %s", resp.Status)
	}

	for _, c := range []struct{ name, sent string }{
		{"half the headers", "POST /convert HTTP/1.1\r\nHost: x\r\n"},
		{"half the body", "POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"request\":"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", srv.Addr().String(), tlsCfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := fmt.Fprint(conn, c.sent); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(conn)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("the server held a stalled client %v (read %q, %v)", took, got, err)
			}
			if len(got) > 0 && !strings.HasPrefix(string(got), "HTTP/1.1 4") {
				t.Errorf("a stalled client got %q, want a 4xx or a closed connection", got)
			}
		})
	}
}
