//go:build chaos && linux

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

package chaos_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/controller"
)

// A check that the controller left something alone (wrote nothing into a
// held ConfigMap, did not fight a mutating webhook) means something only
// once the controller has looked at it since: nudge is that marker.

// syncLog is a controller.Observer (framework.ControllerOptions.Observer)
// that records, for each Book, when the last sync that has ended began.
type syncLog struct {
	mu      sync.Mutex
	started map[cache.ObjectName]time.Time // by a worker, not yet ended
	ended   map[cache.ObjectName]time.Time // the start of the last ended
}

func newSyncLog() *syncLog {
	return &syncLog{started: map[cache.ObjectName]time.Time{}, ended: map[cache.ObjectName]time.Time{}}
}

func (l *syncLog) WorkerBusy(_ int, key cache.ObjectName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started[key] = time.Now()
}

func (l *syncLog) Synced(o controller.SyncOutcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended[o.Key] = l.started[o.Key]
}

// syncedSince reports whether a sync of key that began after t has ended.
func (l *syncLog) syncedSince(key cache.ObjectName, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended[key].After(t)
}

func (l *syncLog) Event(controller.HandlerEvent)                      {}
func (l *syncLog) Relist(controller.Informer, error)                  {}
func (l *syncLog) CacheWait(cache.ObjectName, string, string, string) {}
func (l *syncLog) Wrote(controller.APIWrite)                          {}
func (l *syncLog) Backoff(cache.ObjectName, time.Duration)            {}

// nudgeAnnotation is what nudge writes on a Book.
const nudgeAnnotation = "chaos.test.ydzs.io/nudged"

// nudge annotates each named Book in ns, a change by somebody else that is
// no echo of the controller's own writes, so each is queued again; then it
// waits until the controller watched by syncs has ended, for each, a sync
// that began after the nudge. Each such sync looked at the world as it is
// now: whatever it would write, it has written.
func nudge(t *testing.T, syncs *syncLog, ns string, names []string) {
	t.Helper()
	books := env.Books.WebappV2().Books(ns)
	nudged := time.Now()
	for _, name := range names {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b, err := books.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			metav1.SetMetaDataAnnotation(&b.ObjectMeta, nudgeAnnotation, nudged.Format(time.RFC3339Nano))
			_, err = books.Update(context.Background(), b, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatalf("nudging Book %s/%s: %v", ns, name, err)
		}
	}
	poll.Eventually(t, fmt.Sprintf("each of %d nudged Books to be synced", len(names)), pollInterval, convergeTimeout(len(names)),
		func(context.Context) error {
			var waiting []string
			for _, name := range names {
				if !syncs.syncedSince(cache.ObjectName{Namespace: ns, Name: name}, nudged) {
					waiting = append(waiting, name)
				}
			}
			return poll.Done(len(waiting) == 0, "%d not yet synced since the nudge: %v", len(waiting), waiting[:min(len(waiting), 10)])
		})
}
