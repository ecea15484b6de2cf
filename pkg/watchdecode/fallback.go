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

package watchdecode

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/metrics"
)

// The two places where this package hands an event to client-go's decoder.
const (
	// fallbackFraming: the event's envelope, {"type": ..., "object": ...},
	// is not one the scan recognizes (an escaped key, another key, a
	// missing type).
	fallbackFraming = "framing"
	// fallbackDecoding: the event's object is not a Book of our API
	// version that decodes in one pass: the Status of an ERROR event (an
	// expired watch, say), another version or kind, or malformed JSON.
	fallbackDecoding = "decoding"
)

// fallbacks counts the events handed to client-go's decoder, by where.
// Some are expected (every ERROR event carries a Status); a steady rate of
// Book events means the stream has a shape the fast path does not know,
// and costs the CPU this package saves. --disable-layers=watch-decode
// turns the package off.
var fallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "book_controller_watch_decode_fallbacks_total",
	Help: "Watch events of the Book informer decoded by client-go's decoder instead of pkg/watchdecode's one-pass decoder, by reason (framing: an envelope the scan does not recognize; decoding: an object that is not a Book of the served version, such as an ERROR event's Status).",
}, []string{"reason"})

func init() {
	metrics.Registry.MustRegister(fallbacks)
	for _, reason := range []string{fallbackFraming, fallbackDecoding} {
		fallbacks.WithLabelValues(reason)
	}
}

// logged keeps the log to one line per reason and process: the metric
// counts the rest.
var logged = newLogOnce()

func newLogOnce() map[string]*sync.Once {
	return map[string]*sync.Once{fallbackFraming: {}, fallbackDecoding: {}}
}

// fellBack counts one event handed to client-go's decoder, and logs the
// first of each reason with what was handed over.
func fellBack(reason string, data []byte) {
	fallbacks.WithLabelValues(reason).Inc()
	logged[reason].Do(func() {
		const maxShown = 256
		shown := data
		if len(shown) > maxShown {
			shown = shown[:maxShown]
		}
		klog.Background().Info("Book watch event decoded by client-go's decoder; further ones are only counted",
			"reason", reason, "metric", "book_controller_watch_decode_fallbacks_total", "event", string(shown), "bytes", len(data))
	})
}
