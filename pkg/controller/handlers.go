package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// This file turns informer events into queue keys. Every path ends in
// enqueue(namespace/name of a Book); the sync decides what, if anything, to do.

// bookEventHandler enqueues the Book itself for every real change.
func (c *Controller) bookEventHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueObject,
		UpdateFunc: func(oldObj, newObj any) {
			if sameResourceVersion(oldObj, newObj) {
				// A periodic resync replays the cache; nothing changed, so a
				// converged Book needs no work.
				return
			}
			c.enqueueObject(newObj)
		},
		DeleteFunc: c.enqueueObject,
	}
}

// configMapEventHandler enqueues the Book that controls a ConfigMap, so an
// edit or deletion by someone else is repaired.
func (c *Controller) configMapEventHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			c.enqueueControllingBook(obj)
		},
		UpdateFunc: func(oldObj, newObj any) {
			if sameResourceVersion(oldObj, newObj) {
				return
			}
			// If the controller reference changed, the previous owner must
			// learn that it lost its ConfigMap as well.
			oldCM, ok1 := oldObj.(*corev1.ConfigMap)
			newCM, ok2 := newObj.(*corev1.ConfigMap)
			if !ok1 || !ok2 {
				return
			}
			oldRef, newRef := metav1.GetControllerOf(oldCM), metav1.GetControllerOf(newCM)
			if oldRef != nil && (newRef == nil || oldRef.UID != newRef.UID) {
				c.enqueueControllingBook(oldObj)
			}
			c.enqueueControllingBook(newObj)
		},
		DeleteFunc: func(obj any) {
			c.enqueueControllingBook(obj)
		},
	}
}

// enqueueObject adds the key of a Book, or of the Book inside a deletion
// tombstone, to the queue.
func (c *Controller) enqueueObject(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// enqueueControllingBook enqueues the Book named by a ConfigMap's controller
// reference, but only when that Book exists with the referenced UID: a
// reference with a matching name but another UID is a forgery or a leftover
// from a deleted Book, and must not steer this controller.
func (c *Controller) enqueueControllingBook(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		tombstone, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			utilruntime.HandleError(errUnexpectedObject(obj))
			return
		}
		if cm, ok = tombstone.Obj.(*corev1.ConfigMap); !ok {
			utilruntime.HandleError(errUnexpectedObject(tombstone.Obj))
			return
		}
	}
	ref := metav1.GetControllerOf(cm)
	if ref == nil || ref.Kind != bookGVK.Kind {
		return
	}
	// Compare the group only: a reference written by another API version of
	// Book still points at the same Book.
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != bookGVK.Group {
		return
	}
	book, err := c.booksLister.Books(cm.Namespace).Get(ref.Name)
	if err != nil || book.UID != ref.UID {
		return
	}
	c.queue.Add(cache.ObjectName{Namespace: book.Namespace, Name: book.Name})
}

func sameResourceVersion(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	return ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion()
}

func errUnexpectedObject(obj any) error {
	return fmt.Errorf("unexpected object of type %T in ConfigMap event", obj)
}
