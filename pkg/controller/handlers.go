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
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// This file turns informer events into queue keys, controller-runtime's
// event handlers (EnqueueRequestForObject for Books, a map from ConfigMap to
// Book). Every path ends in enqueue(namespace/name of a Book); the sync
// decides what, if anything, to do.

// bookEventHandler enqueues the Book itself for every real change that is
// not the echo of our own status write (ownWrites.IsEcho). Books of the
// informer's initial list that a sync has answered before queue behind live
// changes (livefirst.go). Each decision is told to the Observer, if any
// (observer.go).
func (c *Controller) bookEventHandler() cache.ResourceEventHandlerDetailedFuncs {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) { c.enqueueObject(obj, EventAdd, isInInitialList) },
		UpdateFunc: func(oldObj, newObj any) {
			if sameResourceVersion(oldObj, newObj) {
				// A periodic resync replays the cache; nothing changed, so a
				// converged Book needs no work.
				c.observeObject(BooksInformer, EventUpdate, false, false, newObj, DecisionResync)
				return
			}
			if book, ok := newObj.(metav1.Object); ok &&
				c.ownWrites.IsEcho(cache.MetaObjectToName(book), booksResource, book.GetResourceVersion()) {
				c.observeObject(BooksInformer, EventUpdate, false, false, newObj, DecisionEcho)
				return
			}
			c.enqueueObject(newObj, EventUpdate, false)
		},
		DeleteFunc: func(obj any) { c.enqueueObject(obj, EventDelete, false) },
	}
}

// configMapEventHandler enqueues, for every change to a ConfigMap in the
// cache, the Book of the same namespace and name, so an edit or deletion by
// someone else is repaired. The echo of our own create or repair is not a
// change to act on (ownWrites.IsEcho). A Book's sync reads only the
// ConfigMap of its own name, so that is the only Book an event can concern;
// whom the ConfigMap's owner reference names, with which UID, is for the
// sync to judge. (Once the handler skipped references with another UID;
// then the deletion of a ConfigMap left by an earlier Book of the same name
// went unheard, and a recreated Book waited for the conflict recheck.)
func (c *Controller) configMapEventHandler() cache.ResourceEventHandlerDetailedFuncs {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) { c.enqueueBookOfChangedConfigMap(obj, EventAdd, isInInitialList) },
		UpdateFunc: func(oldObj, newObj any) {
			if sameResourceVersion(oldObj, newObj) {
				c.observeObject(ConfigMapsInformer, EventUpdate, false, false, newObj, DecisionResync)
				return
			}
			c.enqueueBookOfChangedConfigMap(newObj, EventUpdate, false)
		},
		DeleteFunc: func(obj any) { c.enqueueBookOfConfigMap(obj, EventDelete, false) },
	}
}

// enqueueBookOfChangedConfigMap is enqueueBookOfConfigMap for an added or
// updated ConfigMap, unless it is as our last write left it.
func (c *Controller) enqueueBookOfChangedConfigMap(obj any, typ EventType, isInInitialList bool) {
	if cm, ok := obj.(*cachedConfigMap); ok &&
		c.ownWrites.IsEcho(cache.ObjectName{Namespace: cm.namespace, Name: cm.name}, configMapsResource, cm.resourceVersion) {
		c.observeObject(ConfigMapsInformer, typ, isInInitialList, false, obj, DecisionEcho)
		return
	}
	c.enqueueBookOfConfigMap(obj, typ, isInInitialList)
}

// enqueueObject adds the key of a Book, or of the Book inside a deletion
// tombstone, to the queue.
func (c *Controller) enqueueObject(obj any, typ EventType, isInInitialList bool) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		c.observe(BooksInformer, typ, isInInitialList, false, key, "", DecisionInvalid)
		return
	}
	backfill := isInInitialList && handledBefore(obj)
	c.observeObject(BooksInformer, typ, isInInitialList, backfill, obj, DecisionEnqueued)
	c.enqueueFrom(key, backfill)
}

// enqueueBookOfConfigMap adds the key of the Book named like a ConfigMap, or
// like the ConfigMap inside a deletion tombstone.
func (c *Controller) enqueueBookOfConfigMap(obj any, typ EventType, isInInitialList bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	cm, ok := obj.(*cachedConfigMap)
	if !ok {
		utilruntime.HandleError(errUnexpectedObject(obj))
		c.observe(ConfigMapsInformer, typ, isInInitialList, false, cache.ObjectName{}, "", DecisionInvalid)
		return
	}
	key := cache.ObjectName{Namespace: cm.namespace, Name: cm.name}
	c.observe(ConfigMapsInformer, typ, isInInitialList, isInInitialList, key, cm.resourceVersion, DecisionEnqueued)
	c.enqueueFrom(key, isInInitialList)
}

// enqueue queues a key for a live change.
func (c *Controller) enqueue(key cache.ObjectName) { c.enqueueFrom(key, false) }

// release queues a Book whose event ownWrites held back while our write was
// in flight, once the write's answer showed the event was not its echo: a
// live change.
func (c *Controller) release(key cache.ObjectName) {
	c.observe("", EventReleased, false, false, key, "", DecisionEnqueued)
	c.enqueue(key)
}

// observeObject reports a handler's decision on obj, a Book, a cached
// ConfigMap or a tombstone of either, when there is an observer. The key
// and resourceVersion are worked out only then.
func (c *Controller) observeObject(informer Informer, typ EventType, initial, backfill bool, obj any, d Decision) {
	if c.observer == nil {
		return
	}
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	var key cache.ObjectName
	switch o := obj.(type) {
	case *cachedConfigMap:
		key = cache.ObjectName{Namespace: o.namespace, Name: o.name}
	case metav1.Object:
		key = cache.MetaObjectToName(o)
	}
	rv, _ := resourceVersionOf(obj)
	c.observe(informer, typ, initial, backfill, key, rv, d)
}

// enqueueFrom is the handlers' one queue call. Add does nothing for a key
// already queued, and marks a key being synced to be synced again once the
// worker is done with it. A backfill key, one an informer's initial list
// brought with nothing new to answer, is marked to wait behind the live ones
// (livefirst.go; nil with Options.FIFOQueue).
func (c *Controller) enqueueFrom(key cache.ObjectName, backfill bool) {
	if c.order != nil {
		if backfill {
			c.order.markBackfill(key)
		} else {
			c.order.markLive(key)
		}
	}
	c.queue.Add(key)
}

func sameResourceVersion(oldObj, newObj any) bool {
	o, ok1 := resourceVersionOf(oldObj)
	n, ok2 := resourceVersionOf(newObj)
	return ok1 && ok2 && o == n
}

// resourceVersionOf returns the resourceVersion of a Book or of a cached
// ConfigMap, and false for anything else.
func resourceVersionOf(obj any) (string, bool) {
	switch o := obj.(type) {
	case *cachedConfigMap:
		return o.resourceVersion, true
	case metav1.Object:
		return o.GetResourceVersion(), true
	}
	return "", false
}

func errUnexpectedObject(obj any) error {
	return fmt.Errorf("unexpected object of type %T in ConfigMap event", obj)
}
