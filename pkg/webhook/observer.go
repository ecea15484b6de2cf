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
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// Observer is told of each ConversionReview the Handler answers: the seam
// the live view (pkg/ui) shows the API server's conversion calls through,
// as pkg/controller/observer.go is the controller's. A Handler has none
// unless SetObserver gave it one; then the Handler reads the objects'
// versions and names for it after answering, and otherwise does nothing
// more. Reviewed is called from the HTTP server's goroutines, concurrently,
// once the answer is sent (a review's answer declares its length, so the
// API server has it whole): it must be safe for concurrent use, and must
// not block, for the API server's next call on that connection waits
// behind it.
type Observer interface {
	Reviewed(Review)
}

// MaxReviewNames is how many of a review's objects a Review names: a list
// of a thousand Books in v1 is one review of a thousand objects.
const MaxReviewNames = 5

// Review is one ConversionReview and its answer.
type Review struct {
	// At is when the review arrived.
	At time.Time
	// UID is the review's; empty for what was not a review.
	UID string
	// DesiredAPIVersion is the version the API server asked for, and
	// FromVersions the objects' apiVersions, each once, in order of first
	// appearance (empty when an object is not JSON).
	DesiredAPIVersion string
	FromVersions      []string
	// Objects is how many objects the review holds, Names the
	// namespace/name of the first MaxReviewNames.
	Objects int
	Names   []string
	// Result is one of ResultSuccess, ResultFailure, ResultBadRequest and
	// ResultPanic, as the reviews counter labels it; Message says why,
	// for any but a success.
	Result   string
	Message  string
	Duration time.Duration
}

// SetObserver has o told of every review h answers from now on; nil turns
// it off. Call it before h serves.
func (h *Handler) SetObserver(o Observer) { h.observer = o }

// report tells the observer, if any, of a review and its answer; objects,
// uid and desired are empty for what was not a review.
func (h *Handler) report(w http.ResponseWriter, start time.Time, objects []runtime.RawExtension, uid, desired, result, message string) {
	if h.observer == nil {
		return
	}
	// Timed before the objects are read again, so that the duration is
	// the answer's, as the metrics' is.
	d := time.Since(start)
	// The answer goes out before the objects are read again: a review's
	// declares its length, so the API server has it whole.
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	rv := Review{At: start, UID: uid, DesiredAPIVersion: desired, Objects: len(objects), Result: result,
		Message: message, Duration: d}
	rv.FromVersions, rv.Names = describeObjects(objects)
	h.observer.Reviewed(rv)
}

// describeObjects returns the objects' apiVersions, each once, and the
// names of the first MaxReviewNames.
func describeObjects(objects []runtime.RawExtension) (versions, names []string) {
	for i, obj := range objects {
		var hd header
		if err := json.Unmarshal(obj.Raw, &hd); err != nil {
			continue
		}
		if hd.APIVersion != "" && !slices.Contains(versions, hd.APIVersion) {
			versions = append(versions, hd.APIVersion)
		}
		if i < MaxReviewNames {
			names = append(names, hd.name())
		}
	}
	return versions, names
}
