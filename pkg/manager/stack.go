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

package manager

import (
	"context"
	"errors"

	kubeinformers "k8s.io/client-go/informers"

	"ydzs.io/book-controller/pkg/controller"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions"
	"ydzs.io/book-controller/pkg/leader"
	"ydzs.io/book-controller/pkg/shard" // fork:line shards
)

// stack is one controller with its informers and its Event recorder: the
// process's, or one shard's while this replica holds the shard's Lease.
// It is what leader.Elector runs (leader.Work) and what a shard's slot
// builds (shard.Stack).
type stack struct {
	controller  *controller.Controller
	workers     int
	kubeFactory kubeinformers.SharedInformerFactory
	bookFactory bookinformers.SharedInformerFactory
	// bookCount and configMapCount size the caches for the metrics.
	bookCount, configMapCount *cacheSize
	stopEvents                context.CancelFunc
	// stopInformers is set by Start and called by Stop, both on the
	// goroutine that owns the stack (Run's, or the shard work's).
	stopInformers context.CancelFunc
}

var (
	_ leader.Work = (*stack)(nil)
	_ shard.Stack = (*stack)(nil) // fork:line shards
)

// buildStack starts the Event recorder and builds the controller on
// informer factories of its own (registering its handlers; nothing runs
// yet), writing through w. A partition (non-nil: a shard) restricts the
// informers to it (newInformerFactories). Stop undoes it.
func (m *manager) buildStack(ctx context.Context, w *writers, s partition) (*stack, error) {
	// Events outlive ctx by the drain: the last syncs may still report.
	eventCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	recorder, err := newEventRecorder(eventCtx, w.kube, m.eventLimiter)
	if err != nil {
		stopEvents()
		return nil, err
	}
	st := &stack{workers: m.cfg.Workers, stopEvents: stopEvents}
	st.kubeFactory, st.bookFactory = newInformerFactories(m.clients.kubeReads, m.clients.bookReads,
		m.cfg.Namespace, m.cfg.ResyncPeriod, s)
	books := st.bookFactory.Webapp().V2().Books()
	configMaps := st.kubeFactory.Core().V1().ConfigMaps()
	st.controller, err = controller.New(w.kube, w.books, books, configMaps, recorder, m.cfg.Controller)
	if err != nil {
		stopEvents()
		return nil, err
	}
	st.bookCount = newCacheSize(books.Informer().GetStore(), m.clock)
	st.configMapCount = newCacheSize(configMaps.Informer().GetStore(), m.clock)
	return st, nil
}

// Start starts the informers, on a context of their own: they stop when
// Stop is called, whatever the caller's context does (after a lost Lease,
// it has not ended).
func (s *stack) Start() {
	informerCtx, stopInformers := context.WithCancel(context.Background())
	s.stopInformers = stopInformers
	s.kubeFactory.Start(informerCtx.Done())
	s.bookFactory.Start(informerCtx.Done())
}

// Run runs the controller until ctx ends and it has drained, or Abort.
func (s *stack) Run(ctx context.Context) error { return s.controller.Run(ctx, s.workers) }

// Abort stops the controller at once, or keeps Run from starting it.
func (s *stack) Abort(cause error) { s.controller.Abort(cause) }

// HasSynced reports whether the caches hold their initial lists.
func (s *stack) HasSynced() bool { return s.controller.HasSynced() }

// CachedBooks is the number of Books in the cache: the one count behind
// book_controller_cached_books, with and without shards.
func (s *stack) CachedBooks() int { return s.bookCount.Len() }

// CachedConfigMaps is the number of ConfigMaps in the cache, behind
// book_controller_cached_configmaps.
func (s *stack) CachedConfigMaps() int { return s.configMapCount.Len() }

// Stop stops the informers and waits for them, releases the work queue of
// a controller that never ran (an early return, a standby that never led;
// after Run it changes nothing), and stops the Event broadcaster.
func (s *stack) Stop() {
	if s.stopInformers != nil {
		s.stopInformers()
	}
	s.kubeFactory.Shutdown()
	s.bookFactory.Shutdown()
	s.controller.Abort(errors.New("manager stopped"))
	s.stopEvents()
}
