//go:build chaos && linux

package chaos_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/metrics"
)

// A check that the controller left something alone (wrote nothing into a
// held ConfigMap, did not fight a mutating webhook) means something only
// once the controller has looked at it since: nudge is that marker.

// syncs counts the syncs, of any result, of the in-process controllers. The
// chaos tests run one at a time: they are the test's own controller's.
func syncs() float64 {
	n := 0.0
	for _, r := range []string{metrics.ResultSuccess, metrics.ResultError, metrics.ResultConflict} {
		n += testutil.ToFloat64(metrics.ReconcileTotal.WithLabelValues(controller.Name, r))
	}
	return n
}

// nudgeAnnotation is what nudge writes on a Book.
const nudgeAnnotation = "chaos.test.ydzs.io/nudged"

// nudge annotates each named Book in ns, a change by somebody else that is
// no echo of the controller's own writes, so each is queued again; then it
// waits until the in-process controller has synced that many times more.
// Each of those syncs began after the nudge, and looked at the world as it
// is now: whatever it would write, it has written.
func nudge(t *testing.T, ns string, names []string) {
	t.Helper()
	base := syncs()
	books := env.Books.WebappV1().Books(ns)
	stamp := time.Now().Format(time.RFC3339Nano)
	for _, name := range names {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b, err := books.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			metav1.SetMetaDataAnnotation(&b.ObjectMeta, nudgeAnnotation, stamp)
			_, err = books.Update(context.Background(), b, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatalf("nudging Book %s/%s: %v", ns, name, err)
		}
	}
	poll.Eventually(t, fmt.Sprintf("%d syncs after nudging %d Books", len(names), len(names)), pollInterval, convergeTimeout(len(names)),
		func(context.Context) error {
			n := syncs() - base
			return poll.Done(n >= float64(len(names)), "%v syncs", n)
		})
}
