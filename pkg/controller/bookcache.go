package controller

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// The Book cache holds every Book, typed, as the generated lister returns
// it. Each string a decoder reads is an allocation of its own, and many of
// a Book's repeat what the cache already holds: the namespace of the Book
// before it, our condition's type, status and reason, the ConfigMap's name
// (the Book's). bookCompactor makes those one string each, and drops
// managedFields, which the controller never reads and which is often the
// largest part of an object.

// BookTransform returns the Book informer's transform, which New installs:
// each Book compacted as bookCompactor says, before it enters the cache.
func BookTransform() cache.TransformFunc {
	return (&bookCompactor{}).transform
}

// bookCompactor is the Book informer's transform. It runs
// once per object before the object enters the cache, on the one goroutine
// that feeds the cache, and may change the object: nobody else holds it yet.
type bookCompactor struct {
	// namespace is the namespace of the last Book seen: Books arrive
	// grouped by namespace, and a controller often watches only one.
	namespace atomic.Pointer[string]
}

// transform compacts a Book; anything else (a tombstone) passes unchanged.
func (b *bookCompactor) transform(obj any) (any, error) {
	book, ok := obj.(*webappv1.Book)
	if !ok {
		return obj, nil
	}
	book.ManagedFields = nil
	if last := b.namespace.Load(); last != nil && *last == book.Namespace {
		book.Namespace = *last
	} else {
		ns := book.Namespace
		b.namespace.Store(&ns)
	}
	book.Status.ConfigMapName = intern(book.Status.ConfigMapName, book.Name)
	for i := range book.Status.Conditions {
		c := &book.Status.Conditions[i]
		c.Type = intern(c.Type, ConditionReady)
		c.Status = metav1.ConditionStatus(internAny(string(c.Status),
			string(metav1.ConditionTrue), string(metav1.ConditionFalse), string(metav1.ConditionUnknown)))
		c.Reason = internAny(c.Reason, ReasonConfigMapReady, ReasonConfigMapConflict, ReasonConfigMapOfEarlierBook)
	}
	return book, nil
}

// internAny is intern against each of same in turn.
func internAny(s string, same ...string) string {
	for _, v := range same {
		if s == v {
			return v
		}
	}
	return s
}
