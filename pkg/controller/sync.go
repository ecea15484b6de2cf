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

package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// syncBook is the syncHandler, controller-runtime's Reconcile: it makes the
// cluster match one Book's spec, in the order of sample-controller's
// syncHandler: the Book from the lister, the desired ConfigMap, create or
// repair, then the status. It reads the Book and its ConfigMap from the
// informer caches, copies before it changes anything, and writes only where
// the cluster differs, so running it again on a converged Book makes no API
// calls at all. Only a repair reads the ConfigMap from the API server too
// (repairConfigMap). Its Result and error go to the worker loop, which
// alone decides what the queue does with the key (controller.go,
// reconcileHandler).
func (c *Controller) syncBook(ctx context.Context, key cache.ObjectName) (Result, error) {
	// Before reading the caches: once they have reached our last writes,
	// whatever is read next is at least that new.
	if err := c.ownWrites.cacheBehind(key); err != nil {
		return c.waitForCache(ctx, key, err), nil
	}
	book, err := c.booksLister.Books(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// The garbage collector deletes the ConfigMap through its owner reference.
		klog.FromContext(ctx).V(4).Info("Book is gone; nothing to do", "book", key)
		return Result{}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("reading Book %s from cache: %w", key, err)
	}
	if book.DeletionTimestamp != nil {
		return Result{}, nil
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "book", klog.KObj(book))
	ctx = klog.NewContext(ctx, logger)

	ready, err := c.syncConfigMap(ctx, book)
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// The namespace is being deleted, and the Book with it: every create
		// there is forbidden from now on, so a retry would only fail again.
		// The Book's deletion event ends the matter (as in kube's
		// ReplicaSet controller).
		logger.V(4).Info("Namespace is terminating; not creating the ConfigMap")
		return Result{}, nil
	}
	// A refused write still ends in a status that says why (refusal.go);
	// the refusal then goes back to the worker loop as the error it is.
	refused := asRefusal(err)
	if refused != nil {
		ready = refused.condition(book)
	} else if err != nil {
		return Result{}, err
	}
	if err := c.syncStatus(ctx, book, ready); err != nil {
		return Result{}, err
	}
	if refused != nil {
		return Result{}, refused
	}
	return c.resultFor(ready), nil
}

// resultFor asks for a recheck of a Book whose ConfigMap name is held by
// another object, or by its own ConfigMap on its way out: the object may be
// outside our label-filtered cache, and then its deletion raises no event.
func (c *Controller) resultFor(ready metav1.Condition) Result {
	switch ready.Reason {
	case ReasonConfigMapConflict, ReasonConfigMapOfEarlierBook, ReasonConfigMapDeleting:
		return Result{RequeueAfter: c.conflictRecheck}
	}
	return Result{}
}

// waitForCache leaves a Book whose caches have yet to show one of our own
// writes until they do: the watch event that brings the write to the cache
// also requeues the Book. Our status write always comes back as an event of
// the Book. Our ConfigMap need not: if it is deleted before the informer saw
// it and a relist skips both events, the store moves past it in silence.
// Only for that case the Book is also looked at again after
// cacheLagRecheck; normally the event requeues it long before, and the
// recheck finds nothing to do.
func (c *Controller) waitForCache(ctx context.Context, key cache.ObjectName, behind error) Result {
	klog.FromContext(ctx).V(4).Info("Cache behind our own write; waiting for its event", "book", key, "reason", behind)
	var stale *staleCacheError
	if !errors.As(behind, &stale) {
		return Result{waiting: true}
	}
	if c.observer != nil {
		c.observer.CacheWait(key, stale.Resource.String(), stale.Written, stale.Read)
	}
	if stale.Resource == configMapsResource {
		return Result{RequeueAfter: c.cacheLagRecheck, waiting: true}
	}
	return Result{waiting: true}
}

// syncConfigMap makes the Book's ConfigMap match the desired one and returns
// the Ready condition that results.
func (c *Controller) syncConfigMap(ctx context.Context, book *webappv2.Book) (metav1.Condition, error) {
	desired := desiredConfigMap(book)
	observed, err := c.configMaps.get(book.Namespace, book.Name)
	if err != nil {
		return metav1.Condition{}, fmt.Errorf("reading ConfigMap %s from cache: %w", klog.KObj(book), err)
	}
	if observed == nil {
		return c.createConfigMap(ctx, book, desired)
	}
	if ready, repair, err := judgeConfigMap(book, observed, desired); !repair {
		return ready, err
	}
	return c.repairConfigMap(ctx, book, desired)
}

// createConfigMap creates the desired ConfigMap. The cache only holds
// ConfigMaps with our label, so "not in the cache" can still mean "exists":
// somebody else's, or ours with the label removed. The server's AlreadyExists
// answer tells, and the repair's live read shows whose it is.
func (c *Controller) createConfigMap(ctx context.Context, book *webappv2.Book, desired *corev1.ConfigMap) (metav1.Condition, error) {
	created, err := c.writes.createConfigMap(ctx, book, desired)
	if apierrors.IsAlreadyExists(err) {
		return c.repairConfigMap(ctx, book, desired)
	}
	if err != nil {
		return metav1.Condition{}, fmt.Errorf("creating ConfigMap %s: %w", klog.KObj(desired), err)
	}
	klog.FromContext(ctx).V(2).Info("Created ConfigMap")
	c.recorder.Eventf(book, created, corev1.EventTypeNormal, EventConfigMapCreated, "Create",
		"Created ConfigMap %s", created.Name)
	return readyCondition(book), nil
}

// repairConfigMap puts the desired data and labels back into the Book's
// ConfigMap. It reads the ConfigMap whole from the API server first and
// judges it again as it is now: the cache may keep only part of it (the
// projection layer), and after an AlreadyExists it holds nothing of it at
// all (the ConfigMap lacks our label). An update replaces the whole object,
// and the resourceVersion read makes it fail with a conflict if anyone
// writes in between. A repair follows somebody else's edit, so the extra
// read is rare.
func (c *Controller) repairConfigMap(ctx context.Context, book *webappv2.Book, desired *corev1.ConfigMap) (metav1.Condition, error) {
	live, err := c.kubeClient.CoreV1().ConfigMaps(book.Namespace).Get(ctx, desired.Name, metav1.GetOptions{})
	if err != nil {
		// NotFound too: the delete event on its way requeues the Book.
		return metav1.Condition{}, fmt.Errorf("reading ConfigMap %s to repair it: %w", klog.KObj(desired), err)
	}
	if ready, repair, err := judgeConfigMap(book, (*wholeConfigMap)(live), desired); !repair {
		return ready, err
	}
	updated, err := c.writes.updateConfigMap(ctx, book, repairedConfigMap(live, desired))
	if err != nil {
		return metav1.Condition{}, fmt.Errorf("updating ConfigMap %s: %w", klog.KObj(desired), err)
	}
	klog.FromContext(ctx).V(2).Info("Updated ConfigMap")
	c.recorder.Eventf(book, updated, corev1.EventTypeNormal, EventConfigMapUpdated, "Update",
		"Updated ConfigMap %s to match the spec", updated.Name)
	return readyCondition(book), nil
}

// syncStatus writes the Book's status through the status subresource, only
// when it differs from what the cache shows.
func (c *Controller) syncStatus(ctx context.Context, book *webappv2.Book, ready metav1.Condition) error {
	status := computeStatus(book, ready, c.clock.Now())
	if statusEqual(book.Status, status) {
		return nil
	}
	updated := book.DeepCopy()
	updated.Status = status
	if _, err := c.writes.updateStatus(ctx, updated); err != nil {
		return fmt.Errorf("updating status of Book %s: %w", klog.KObj(book), err)
	}
	klog.FromContext(ctx).V(2).Info("Updated status", "ready", ready.Status, "reason", ready.Reason)

	// Warn once per episode, when the Book enters the trouble, not on every
	// recheck or retry while it lasts.
	if warningReasons[ready.Reason] {
		prev := meta.FindStatusCondition(book.Status.Conditions, ConditionReady)
		if prev == nil || prev.Reason != ready.Reason {
			c.recorder.Eventf(book, nil, corev1.EventTypeWarning, ready.Reason, "Sync", "%s", ready.Message)
		}
	}
	return nil
}
