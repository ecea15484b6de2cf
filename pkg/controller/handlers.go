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
	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// This file turns informer events into queue keys: controller-runtime's
// EnqueueRequestForObject for Books, and for ConfigMaps a map to the Book of
// the same namespace and name (sample-controller's handleObject). Every
// event of either informer goes through handle, which decides one of three
// things: a resync to ignore, the echo of our own write to skip, or a key to
// queue. The sync then decides what, if anything, to do.

// bookEventHandler queues the Book of every event.
func (c *Controller) bookEventHandler() cache.ResourceEventHandlerDetailedFuncs {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initialList bool) { c.handle(BooksInformer, EventAdd, nil, obj, initialList) },
		UpdateFunc: func(oldObj, newObj any) { c.handle(BooksInformer, EventUpdate, oldObj, newObj, false) },
		DeleteFunc: func(obj any) { c.handle(BooksInformer, EventDelete, nil, obj, false) },
	}
}

// configMapEventHandler queues, for every event of a ConfigMap in the cache
// (ours, by its label), the Book of the same namespace and name, so that an
// edit or deletion by someone else is repaired. A Book's sync reads only the
// ConfigMap of its own name, so that is the only Book an event can concern;
// whom the ConfigMap's owner reference names, with which UID, is for the
// sync to judge. (Once the handler skipped references with another UID;
// then the deletion of a ConfigMap left by an earlier Book of the same name
// went unheard, and a recreated Book waited for the conflict recheck.)
func (c *Controller) configMapEventHandler() cache.ResourceEventHandlerDetailedFuncs {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initialList bool) { c.handle(ConfigMapsInformer, EventAdd, nil, obj, initialList) },
		UpdateFunc: func(oldObj, newObj any) { c.handle(ConfigMapsInformer, EventUpdate, oldObj, newObj, false) },
		DeleteFunc: func(obj any) { c.handle(ConfigMapsInformer, EventDelete, nil, obj, false) },
	}
}

// object is what the handlers read of a cached object: a Book, a ConfigMap
// or the ConfigMap projection's cachedConfigMap.
type object interface {
	GetNamespace() string
	GetName() string
	GetResourceVersion() string
}

// handle is the way of every event to the queue. obj is the object as the
// cache now holds it, or as it was last seen for a deletion (then possibly
// in a tombstone, when the deletion itself was missed); oldObj is the
// previous one for an update.
func (c *Controller) handle(informer Informer, typ EventType, oldObj, obj any, initialList bool) {
	ev := HandlerEvent{Informer: informer, Type: typ, InitialList: initialList}
	o, key, ok := objectOf(informer, obj)
	if ok {
		ev.Key, ev.ResourceVersion = key, resourceVersion(o)
	}
	if o != nil && informer == BooksInformer {
		c.readiness.bookChanged(o, typ == EventDelete)
	}
	switch {
	case !ok:
		utilruntime.HandleError(errUnexpectedObject(string(informer)+" event", obj))
		ev.Decision = DecisionInvalid
	case typ == EventUpdate && sameResourceVersion(oldObj, ev.ResourceVersion):
		// A periodic resync replays the cache: nothing changed.
		ev.Decision = DecisionResync
	case typ != EventDelete && c.ownWrites.isEcho(ev.Key, resourceOf(informer), ev.ResourceVersion):
		// The sync that wrote this already judged this very object.
		ev.Decision = DecisionEcho
	default:
		ev = c.enqueue(ev, o)
	}
	c.observe(ev)
}

// enqueue adds ev's key to the queue, telling the queue's order first
// whether it is a live change (livefirst.go). Add does nothing for a key
// already queued, and marks a key being synced to be synced again once the
// worker is done with it.
func (c *Controller) enqueue(ev HandlerEvent, obj any) HandlerEvent {
	ev.Decision, ev.Backfill = DecisionEnqueued, c.order.mark(ev.Key, obj, ev.InitialList)
	c.queue.Add(ev.Key)
	return ev
}

// objectOf returns what an event of informer carries, and the key of the
// Book it concerns: the Book itself, or the Book of a ConfigMap's
// namespace and name. A tombstone gives its object, or, for a Book, only
// its key when it holds none; o is nil then. ok is false for anything that
// is not of the informer's kind.
func objectOf(informer Informer, obj any) (o object, key cache.ObjectName, ok bool) {
	if tombstone, isTombstone := obj.(cache.DeletedFinalStateUnknown); isTombstone {
		if tombstone.Obj == nil && informer == BooksInformer {
			key, err := cache.ParseObjectName(tombstone.Key)
			return nil, key, err == nil
		}
		obj = tombstone.Obj
	}
	switch v := obj.(type) {
	case *webappv2.Book:
		o, ok = v, informer == BooksInformer
	case *corev1.ConfigMap:
		o, ok = v, informer == ConfigMapsInformer
	case object:
		// What the ConfigMap informer's transform made of a ConfigMap.
		o, ok = v, informer == ConfigMapsInformer
	}
	if !ok {
		return nil, cache.ObjectName{}, false
	}
	return o, cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}, true
}

func resourceVersion(o object) string {
	if o == nil {
		return ""
	}
	return o.GetResourceVersion()
}

func sameResourceVersion(oldObj any, rv string) bool {
	o, ok := oldObj.(object)
	return ok && o.GetResourceVersion() == rv
}

// resourceOf is the resource an informer caches.
func resourceOf(informer Informer) resource {
	if informer == BooksInformer {
		return booksResource
	}
	return configMapsResource
}
