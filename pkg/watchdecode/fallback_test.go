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
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// TestFallbacksAreCountedAndLoggedOnce: events the fast path does not take
// still decode as client-go decodes them, each is counted under its
// reason, and each reason is logged once per process.
func TestFallbacksAreCountedAndLoggedOnce(t *testing.T) {
	var lines []string
	klog.SetLogger(funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{}))
	t.Cleanup(klog.ClearLogger)
	logged = newLogOnce() // as in a fresh process
	framing0 := testutil.ToFloat64(fallbacks.WithLabelValues(fallbackFraming))
	decoding0 := testutil.ToFloat64(fallbacks.WithLabelValues(fallbackDecoding))

	status := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	// An extra envelope key sends the envelope to client-go (framing); an
	// ERROR event's Status, to client-go's object decoder (decoding).
	extraKey := `{"type":"ADDED","object":` + strings.TrimSuffix(strings.TrimPrefix(line(t, watch.Added, book(1, "One")), `{"object":`), "\n")
	extraKey = strings.Replace(extraKey, `,"type":"ADDED"}`, `,"note":"x"}`, 1)
	stream := extraKey + "\n" + line(t, watch.Error, status) + line(t, watch.Error, status) + line(t, watch.Added, book(2, "Two"))
	sameAsClientGo(t, []byte(stream))

	// client-go's watch decoder decodes the ERROR events' objects again
	// itself, so the counts are at least what ours handed over.
	if got := testutil.ToFloat64(fallbacks.WithLabelValues(fallbackFraming)) - framing0; got < 1 {
		t.Errorf("framing fallbacks: got %v, want at least 1", got)
	}
	if got := testutil.ToFloat64(fallbacks.WithLabelValues(fallbackDecoding)) - decoding0; got < 2 {
		t.Errorf("decoding fallbacks: got %v, want at least 2 (two ERROR events)", got)
	}
	logged := map[string]int{}
	for _, l := range lines {
		for _, reason := range []string{fallbackFraming, fallbackDecoding} {
			if strings.Contains(l, `"reason"="`+reason+`"`) || strings.Contains(l, `"reason":"`+reason+`"`) {
				logged[reason]++
			}
		}
	}
	for _, reason := range []string{fallbackFraming, fallbackDecoding} {
		if n := logged[reason]; n != 1 {
			t.Errorf("%s fallback logged %d times, want once per process; log lines: %q", reason, n, lines)
		}
	}
}
