package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// FieldManager names this controller in managedFields of what it writes.
const FieldManager = "book-controller"

// syncBook is the syncHandler: it makes the cluster match one Book's spec.
// It reads only from the informer caches, copies before it changes anything,
// and writes only where the cluster differs, so running it again on a
// converged Book makes no API calls at all.
func (c *Controller) syncBook(ctx context.Context, key cache.ObjectName) error {
	// Before reading the caches: once they have reached our last writes,
	// whatever is read next is at least that new.
	if err := c.consistency.EnsureReady(key); err != nil {
		c.awaitOwnWrite(ctx, key, err)
		return nil
	}
	book, err := c.booksLister.Books(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.consistency.Clear(key, "")
		// The garbage collector deletes the ConfigMap through its owner reference.
		klog.FromContext(ctx).V(4).Info("Book is gone; nothing to do", "book", key)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Book %s from cache: %w", key, err)
	}
	if book.DeletionTimestamp != nil {
		return nil
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
		return nil
	}
	if err != nil {
		return err
	}
	return c.syncStatus(ctx, book, ready)
}

// awaitOwnWrite leaves a Book whose caches have yet to show one of our own
// writes (see consistency.go) until they do: the watch event that brings
// the write to the cache also requeues the Book. Our status write always
// comes back as an event of the Book. Our ConfigMap need not: if it is
// deleted before the informer saw it and a relist skips both events, the
// store moves past it in silence. Only for that case the Book is also
// looked at again after cacheLagRecheck, by which time the cache has
// answered; normally the event requeues it long before, and the recheck
// finds nothing to do.
func (c *Controller) awaitOwnWrite(ctx context.Context, key cache.ObjectName, err error) {
	klog.FromContext(ctx).V(4).Info("Cache behind our own write; waiting for its event", "book", key, "reason", err)
	var stale *staleCacheError
	if errors.As(err, &stale) && stale.Resource == configMapsResource {
		c.queue.AddAfter(key, c.cacheLagRecheck)
	}
}

// syncConfigMap makes the Book's ConfigMap match the desired one and returns
// the Ready condition that results.
func (c *Controller) syncConfigMap(ctx context.Context, book *webappv1.Book) (metav1.Condition, error) {
	desired := desiredConfigMap(book)
	observed, err := c.configMaps.get(book.Namespace, book.Name)
	if err != nil {
		return metav1.Condition{}, fmt.Errorf("reading ConfigMap %s from cache: %w", klog.KObj(book), err)
	}
	if observed == nil {
		return c.createConfigMap(ctx, book, desired)
	}
	return c.reconcileConfigMap(ctx, book, observed, nil, desired)
}

// createConfigMap creates the desired ConfigMap. The cache only holds
// ConfigMaps with our label, so "not in the cache" can still mean "exists":
// somebody else's, or ours with the label removed. The server's AlreadyExists
// answer tells, and a live read shows whose it is.
func (c *Controller) createConfigMap(ctx context.Context, book *webappv1.Book, desired *corev1.ConfigMap) (metav1.Condition, error) {
	client := c.kubeClient.CoreV1().ConfigMaps(book.Namespace)
	created, err := ownWrite(c, book, configMapsResource, func() (*corev1.ConfigMap, error) {
		return client.Create(ctx, desired, metav1.CreateOptions{FieldManager: FieldManager})
	})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Created ConfigMap")
		c.recorder.Eventf(book, created, corev1.EventTypeNormal, EventConfigMapCreated, "Create",
			"Created ConfigMap %s", created.Name)
		return readyCondition(book), nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return metav1.Condition{}, fmt.Errorf("creating ConfigMap %s: %w", klog.KObj(desired), err)
	}
	existing, err := client.Get(ctx, desired.Name, metav1.GetOptions{})
	if err != nil {
		return metav1.Condition{}, fmt.Errorf("reading existing ConfigMap %s: %w", klog.KObj(desired), err)
	}
	return c.reconcileConfigMap(ctx, book, projectConfigMap(existing), existing, desired)
}

// reconcileConfigMap repairs an existing ConfigMap that the Book controls and
// leaves any other one untouched. observed is what the cache keeps of it;
// live is the whole object when it was just read from the API server, else
// nil.
func (c *Controller) reconcileConfigMap(ctx context.Context, book *webappv1.Book, observed *cachedConfigMap, live, desired *corev1.ConfigMap) (metav1.Condition, error) {
	if !observed.controlledBy(book.UID) {
		// Never modify what we don't control. Look again later: the other
		// object may be outside our label-filtered cache, and then its
		// deletion raises no event.
		c.queue.AddAfter(cache.MetaObjectToName(book), c.conflictRecheck)
		if controlledByEarlierBook(observed, book) {
			// Not a conflict: the garbage collector is on its way, and the
			// ConfigMap's delete event brings the Book back.
			return earlierBookCondition(book, observed), nil
		}
		return conflictCondition(book), nil
	}
	if observed.deleting {
		// Being deleted; its delete event requeues the Book to recreate it.
		return metav1.Condition{}, fmt.Errorf("ConfigMap %s is being deleted; will recreate it", klog.KObj(desired))
	}
	if configMapUpToDate(observed, desired) {
		return readyCondition(book), nil
	}
	return c.repairConfigMap(ctx, book, live, desired)
}

// repairConfigMap puts the desired data and labels back into the Book's
// ConfigMap. The cache keeps only part of a ConfigMap (configmapcache.go),
// and an update replaces the whole object, so unless live was just read,
// the ConfigMap is read from the API server first; its resourceVersion
// makes the update fail with a conflict if anyone writes in between. A
// repair follows somebody else's edit, so the extra read is rare.
func (c *Controller) repairConfigMap(ctx context.Context, book *webappv1.Book, live, desired *corev1.ConfigMap) (metav1.Condition, error) {
	client := c.kubeClient.CoreV1().ConfigMaps(book.Namespace)
	if live == nil {
		var err error
		if live, err = client.Get(ctx, desired.Name, metav1.GetOptions{}); err != nil {
			// NotFound too: the delete event on its way requeues the Book.
			return metav1.Condition{}, fmt.Errorf("reading ConfigMap %s to repair it: %w", klog.KObj(desired), err)
		}
		if !metav1.IsControlledBy(live, book) || live.DeletionTimestamp != nil {
			// It changed hands (or began to go) since the cache saw it;
			// its watch event requeues the Book, and the next sync judges
			// afresh.
			return metav1.Condition{}, fmt.Errorf("ConfigMap %s changed since it was cached; will look again", klog.KObj(desired))
		}
		if configMapUpToDate(projectConfigMap(live), desired) {
			return readyCondition(book), nil
		}
	}
	updated, err := ownWrite(c, book, configMapsResource, func() (*corev1.ConfigMap, error) {
		return client.Update(ctx, repairedConfigMap(live, desired), metav1.UpdateOptions{FieldManager: FieldManager})
	})
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
func (c *Controller) syncStatus(ctx context.Context, book *webappv1.Book, ready metav1.Condition) error {
	status := computeStatus(book, ready, c.clock.Now())
	if statusEqual(book.Status, status) {
		return nil
	}
	updated := book.DeepCopy()
	updated.Status = status
	_, err := ownWrite(c, book, booksResource, func() (*webappv1.Book, error) {
		return c.bookClient.WebappV1().Books(book.Namespace).UpdateStatus(ctx, updated,
			metav1.UpdateOptions{FieldManager: FieldManager})
	})
	if err != nil {
		return fmt.Errorf("updating status of Book %s: %w", klog.KObj(book), err)
	}
	klog.FromContext(ctx).V(2).Info("Updated status", "ready", ready.Status, "reason", ready.Reason)

	// Warn once per episode, when the Book enters the conflict, not on every
	// recheck while it lasts.
	if ready.Reason == ReasonConfigMapConflict {
		prev := meta.FindStatusCondition(book.Status.Conditions, ConditionReady)
		if prev == nil || prev.Reason != ReasonConfigMapConflict {
			c.recorder.Eventf(book, nil, corev1.EventTypeWarning, EventConfigMapConflict, "Sync", "%s", ready.Message)
		}
	}
	return nil
}

// ownWrite sends one of our writes for book, of resource, and keeps the
// consistency store informed (BeginWrite, then WroteAt or WriteFailed), so
// that the informer's echo of the write is known for what it is and the
// caches are awaited before the Book's next sync. When the store held back
// an event that was not the echo, the Book is queued again.
func ownWrite[T metav1.Object](c *Controller, book *webappv1.Book, resource schema.GroupResource, send func() (T, error)) (T, error) {
	key := cache.MetaObjectToName(book)
	c.consistency.BeginWrite(key, book.UID, resource)
	sent := false
	defer func() {
		// Also after a panic in send: a write left in flight would hold
		// back the Book's events for good.
		if !sent && c.consistency.WriteFailed(key, resource) {
			c.queue.Add(key)
		}
	}()
	obj, err := send()
	if err != nil {
		return obj, err
	}
	sent = true
	if c.consistency.WroteAt(key, book.UID, resource, obj.GetResourceVersion()) {
		c.queue.Add(key)
	}
	return obj, nil
}
