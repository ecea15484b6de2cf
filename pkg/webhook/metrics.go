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
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// Results of a review, the values of the reviews counter's "result" label.
const (
	// ResultSuccess: every object converted.
	ResultSuccess = "success"
	// ResultFailure: a review answered with a Failure result (an object
	// that is not a Book of a served version, an unknown desired version).
	ResultFailure = "failure"
	// ResultBadRequest: not a review (4xx): wrong method, media type,
	// size, or JSON.
	ResultBadRequest = "bad_request"
	// ResultPanic: the conversion panicked (500): a bug.
	ResultPanic = "panic"
)

// Metrics counts the reviews and the Books in them, and times them.
type Metrics struct {
	reviews  *prometheus.CounterVec
	objects  *prometheus.CounterVec
	duration prometheus.Histogram
}

// NewMetrics registers the webhook's metrics in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "book_controller_conversion_reviews_total",
			Help: "ConversionReviews answered by the conversion webhook, by result (success, failure, bad_request, panic).",
		}, []string{"result"}),
		// By the version asked for: the API server sends only objects of
		// another version, so with two versions "to" names the direction,
		// and tells which clients cost conversions (docs/api-versions.md).
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "book_controller_conversion_objects_total",
			Help: "Books converted in the ConversionReviews answered with success, by the version converted to (v1, v2).",
		}, []string{"to"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "book_controller_conversion_review_duration_seconds",
			Help:    "Time the conversion webhook took to answer a ConversionReview, from its arrival to its answer.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
		}),
	}
	for _, r := range []string{ResultSuccess, ResultFailure, ResultBadRequest, ResultPanic} {
		m.reviews.WithLabelValues(r) // every series from the start, at 0
	}
	for _, to := range []string{webappv1.SchemeGroupVersion.Version, webappv2.SchemeGroupVersion.Version} {
		m.objects.WithLabelValues(to)
	}
	reg.MustRegister(m.reviews, m.objects, m.duration)
	return m
}

// converted counts n Books converted to the API version to (group/version).
func (m *Metrics) converted(to string, n int) {
	if m == nil {
		return
	}
	m.objects.WithLabelValues(path.Base(to)).Add(float64(n))
}

func (m *Metrics) observe(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.reviews.WithLabelValues(result).Inc()
	m.duration.Observe(d.Seconds())
}
