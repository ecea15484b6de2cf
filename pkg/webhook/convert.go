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

// Package webhook is the Book CRD's conversion webhook: an http.Handler for
// apiextensions.k8s.io/v1 ConversionReviews at /convert that converts Books
// between webapp.ydzs.io/v1 and v2 with the functions of
// pkg/apis/webapp/v1/conversion.go, a TLS server for it, and the
// certificates it serves (a CA and a serving certificate kept in a Secret,
// the CA injected into the CRD, rotated before they expire; certs.go,
// secret.go and cabundle.go).
// docs/api-versions.md tells how it is deployed.
package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// Path is where the API server sends ConversionReviews: the path of
// manifests/crd.yaml's clientConfig.
const Path = "/convert"

// DefaultMaxBodyBytes bounds a review's body. The API server sends at most
// its own request limit (3 MiB for etcd's object size) of Books in one
// review; anything larger is not from it.
const DefaultMaxBodyBytes = 3 << 20

// The kind, and the versions, this webhook converts.
var (
	v1Version = webappv1.SchemeGroupVersion.String()
	v2Version = webappv2.SchemeGroupVersion.String()
)

// Handler answers ConversionReviews at Path. Its zero value is not usable:
// build it with NewHandler.
type Handler struct {
	metrics *Metrics
	// observer, when set, is told of each review (observer.go).
	observer Observer
	maxBody  int64
	// convert converts one object; a seam for the tests of panics.
	convert func(raw []byte, desired string) ([]byte, error)
}

// NewHandler returns the /convert handler, counting into m (nil: no
// metrics). maxBody <= 0 means DefaultMaxBodyBytes.
func NewHandler(m *Metrics, maxBody int64) *Handler {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	return &Handler{metrics: m, maxBody: maxBody, convert: convertObject}
}

// Mux serves the handler at Path, and nothing else.
func (h *Handler) Mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	return mux
}

// ServeHTTP answers one review. Requests that are not a review (wrong
// method, media type, size, or JSON) get a 4xx with a one-line message; a
// review whose objects cannot all be converted gets a Failure result that
// names the object and the field, and no converted objects: a review is
// converted whole or not at all.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	logger := klog.FromContext(r.Context()).WithName("conversion")
	result, message := ResultBadRequest, ""
	var req apiextensionsv1.ConversionRequest
	defer func() {
		if p := recover(); p != nil {
			// A panic is a bug in the conversion: the API server gets a 500
			// that says so, the process keeps serving.
			result, message = ResultPanic, fmt.Sprintf("conversion webhook: internal error: %v", p)
			logger.Error(nil, "Conversion panicked", "panic", p, "stack", string(debug.Stack()))
			http.Error(w, message, http.StatusInternalServerError)
		}
		h.metrics.observe(result, time.Since(start))
		h.report(w, start, req.Objects, string(req.UID), req.DesiredAPIVersion, result, message)
	}()

	review, bad := h.readReview(w, r)
	if bad != nil {
		message = bad.message
		http.Error(w, bad.message, bad.code)
		return
	}
	req = *review.Request
	resp := h.review(review.Request)
	result = ResultSuccess
	if resp.Result.Status == metav1.StatusSuccess {
		h.metrics.converted(req.DesiredAPIVersion, len(req.Objects))
	} else {
		result, message = ResultFailure, resp.Result.Message
		logger.Info("Conversion refused", "uid", resp.UID, "desiredAPIVersion", review.Request.DesiredAPIVersion,
			"objects", len(review.Request.Objects), "reason", resp.Result.Message)
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.TypeMeta = metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "ConversionReview"}
	}
	data, err := json.Marshal(out)
	if err != nil {
		result, message = ResultPanic, fmt.Sprintf("conversion webhook: encoding the response: %v", err)
		http.Error(w, message, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// With its length declared, the answer is whole once flushed: the API
	// server need not wait for the observer (observer.go) to return.
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// badRequest is a request that is not a review: its 4xx and one-line
// message.
type badRequest struct {
	code    int
	message string
}

// readReview reads a ConversionReview with a request and a uid from r, or
// returns why it is not one: the 4xx and one-line message to answer.
func (h *Handler) readReview(w http.ResponseWriter, r *http.Request) (*apiextensionsv1.ConversionReview, *badRequest) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, &badRequest{http.StatusMethodNotAllowed, "conversion webhook: only POST is served"}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, &badRequest{http.StatusUnsupportedMediaType, fmt.Sprintf("conversion webhook: Content-Type %q: only application/json is served", ct)}
		}
	}
	// A declared length over the limit is refused before a byte of the body
	// is read; an undeclared one (chunked) is cut at the limit.
	if r.ContentLength > h.maxBody {
		return nil, &badRequest{http.StatusRequestEntityTooLarge, fmt.Sprintf("conversion webhook: body of %d bytes is over the limit of %d", r.ContentLength, h.maxBody)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &badRequest{http.StatusRequestEntityTooLarge, fmt.Sprintf("conversion webhook: body is over the limit of %d bytes", h.maxBody)}
		}
		return nil, &badRequest{http.StatusBadRequest, fmt.Sprintf("conversion webhook: reading the body: %v", err)}
	}

	var review apiextensionsv1.ConversionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, &badRequest{http.StatusBadRequest, fmt.Sprintf("conversion webhook: the body is not a ConversionReview: %v", oneLine(err))}
	}
	if review.Request == nil || review.Request.UID == "" {
		return nil, &badRequest{http.StatusBadRequest, "conversion webhook: the ConversionReview has no request, or its request no uid"}
	}
	return &review, nil
}

// review converts every object of req, or none.
func (h *Handler) review(req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	resp := &apiextensionsv1.ConversionResponse{UID: req.UID}
	fail := func(format string, args ...any) *apiextensionsv1.ConversionResponse {
		resp.ConvertedObjects = nil
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf(format, args...)}
		return resp
	}
	if req.DesiredAPIVersion != v1Version && req.DesiredAPIVersion != v2Version {
		return fail("desiredAPIVersion %q: this webhook converts Books to %s or %s only", req.DesiredAPIVersion, v1Version, v2Version)
	}
	converted := make([]runtime.RawExtension, 0, len(req.Objects))
	for i, obj := range req.Objects {
		out, err := h.convert(obj.Raw, req.DesiredAPIVersion)
		if err != nil {
			return fail("objects[%d] %s: %v", i, objectName(obj.Raw), oneLine(err))
		}
		converted = append(converted, runtime.RawExtension{Raw: out})
	}
	resp.ConvertedObjects = converted
	resp.Result = metav1.Status{Status: metav1.StatusSuccess}
	return resp
}

// header is what is read of an object before converting it.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
}

// objectName is namespace/name of raw, for messages; "(unnamed)" when raw
// does not say.
func objectName(raw []byte) string {
	var h header
	_ = json.Unmarshal(raw, &h)
	return h.name()
}

// name is the object's namespace/name, or "(unnamed)".
func (h header) name() string {
	switch {
	case h.Metadata.Name == "":
		return "(unnamed)"
	case h.Metadata.Namespace == "":
		return h.Metadata.Name
	}
	return h.Metadata.Namespace + "/" + h.Metadata.Name
}

// convertObject converts one Book to desired, an API version this webhook
// serves. A Book already of that version comes back as it was sent.
func convertObject(raw []byte, desired string) ([]byte, error) {
	var h header
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if h.Kind != "Book" || (h.APIVersion != v1Version && h.APIVersion != v2Version) {
		return nil, fmt.Errorf("apiVersion %q, kind %q: this webhook converts only Books of %s and %s", h.APIVersion, h.Kind, v1Version, v2Version)
	}
	if h.APIVersion == desired {
		return raw, nil
	}
	if h.APIVersion == v1Version {
		var src webappv1.Book
		if err := decode(raw, &src); err != nil {
			return nil, err
		}
		var dst webappv2.Book
		if err := src.ConvertTo(&dst); err != nil {
			return nil, err
		}
		dst.TypeMeta = metav1.TypeMeta{APIVersion: v2Version, Kind: "Book"}
		return json.Marshal(&dst)
	}
	var src webappv2.Book
	if err := decode(raw, &src); err != nil {
		return nil, err
	}
	var dst webappv1.Book
	if err := dst.ConvertFrom(&src); err != nil {
		return nil, err
	}
	dst.TypeMeta = metav1.TypeMeta{APIVersion: v1Version, Kind: "Book"}
	return json.Marshal(&dst)
}

// decode reads raw into obj as the API server's own decoder would (field
// names case-sensitive, integers kept), and names the field of an error.
func decode(raw []byte, obj any) error {
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Errorf("%s: cannot be a JSON %s: want %s", typeErr.Field, typeErr.Value, typeErr.Type)
	}
	return err
}

// oneLine keeps a message on one line, for a status message or a log.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
