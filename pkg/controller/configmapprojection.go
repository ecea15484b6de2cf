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
	"strconv" // fork:line shards

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	booklisters "ydzs.io/book-controller/pkg/generated/listers/webapp/v2"
	"ydzs.io/book-controller/pkg/shard" // fork:line shards
)

// configMapProjection is an optimization layer (Options.Off.ConfigMapProjection
// turns it off): the classic loop caches whole ConfigMaps and reads them
// through a lister (configmap.go, configMapLister). The ConfigMap informer
// holds one entry per Book, the largest thing this controller keeps, and
// the sync reads a handful of fields of each; so the informer keeps just
// those, in a cachedConfigMap, and a sync that must write a ConfigMap reads
// it whole from the API server first, as it does anyway (sync.go,
// repairConfigMap).
//
// Gain: 457 bytes per cached ConfigMap instead of 1,509 for a whole one
// without managedFields (`go test ./pkg/controller -run '^$' -bench
// CachedObjectBytes -benchtime 3x`). controller-runtime's cache cannot do this: its Get
// copies a cached object into one of the type asked for, so what it caches
// must be a ConfigMap, and one trimmed to the same fields still costs 1,405
// bytes, its two maps.
type configMapProjection struct {
	// indexer is the ConfigMap informer's store; the informer writes it,
	// workers read it.
	indexer cache.Indexer
	// books is the Book cache, whose strings the projections share.
	books booklisters.BookLister
}

// newConfigMapProjection reads the ConfigMap informer's store, whose
// transform must be the projection's transform.
func newConfigMapProjection(indexer cache.Indexer, books booklisters.BookLister) *configMapProjection {
	return &configMapProjection{indexer: indexer, books: books}
}

func (c *configMapProjection) transformFunc() cache.TransformFunc { return c.transform }

// transform is the ConfigMap informer's transform (New installs it): each
// ConfigMap becomes its projection, whose strings are moreover the cached
// Book's where they are equal, as most are (namespace, name, owner UID,
// title); our ConfigMaps arrive after their Book, so the Book is usually
// cached. Anything else passes unchanged; so does a value already projected,
// as a transform may be handed its own output.
func (c *configMapProjection) transform(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	v := projectConfigMap(cm)
	if book, err := c.books.Books(v.namespace).Get(v.name); err == nil {
		v.shareStrings(book)
	}
	return v, nil
}

// get returns what the cache holds of the ConfigMap namespace/name, or nil
// when it holds nothing of that name.
func (c *configMapProjection) get(namespace, name string) (observedConfigMap, error) {
	obj, exists, err := c.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !exists {
		return nil, err
	}
	v, ok := obj.(*cachedConfigMap)
	if !ok {
		return nil, errUnexpectedObject("the ConfigMap cache, which lacks the projection's transform", obj)
	}
	return v, nil
}

// cachedConfigMap is what the ConfigMap informer keeps of a ConfigMap: the
// fields a sync compares with the desired ConfigMap or reports in a
// condition. Its strings are the decoded object's, except where one equals
// a string kept already or a constant: each decoded string is an allocation
// of its own, and ours repeat the name and our constants.
type cachedConfigMap struct {
	namespace, name, resourceVersion string
	// controller is the controller owner reference, if hasController.
	controller ownerRef
	// managedBy, book and bucket are the values of ManagedByLabel,
	// BookLabel and shard.BucketLabel, "" when absent: the values we write
	// are never empty, so an absent label and an empty one are both simply
	// wrong. A bucket value we would write is one of shard.BucketName's
	// strings, shared by every entry.
	managedBy, book, bucket string
	// title and price are data's values under TitleKey and PriceKey, and
	// rest its other keys, nil when there are none, as for a Book whose
	// price v1 can say and that has no authors (configMapData): most.
	// titleAndPrice is true when data holds those two keys and there is no
	// binaryData.
	title, price  string
	rest          map[string]string
	titleAndPrice bool
	hasController bool
	// deleting is true once metadata.deletionTimestamp is set.
	deleting bool
}

// projectConfigMap returns what the cache keeps of cm.
func projectConfigMap(cm *corev1.ConfigMap) *cachedConfigMap {
	title, hasTitle := cm.Data[TitleKey]
	price, hasPrice := cm.Data[PriceKey]
	v := &cachedConfigMap{
		namespace:       cm.Namespace,
		name:            cm.Name,
		resourceVersion: cm.ResourceVersion,
		managedBy:       intern(cm.Labels[ManagedByLabel], ManagedByValue),
		book:            intern(cm.Labels[BookLabel], cm.Name),
		title:           title,
		price:           price,
		titleAndPrice:   hasTitle && hasPrice && len(cm.BinaryData) == 0,
		deleting:        cm.DeletionTimestamp != nil,
	}
	for k, val := range cm.Data {
		if k == TitleKey || k == PriceKey {
			continue
		}
		if v.rest == nil {
			v.rest = make(map[string]string, len(cm.Data)-2)
		}
		v.rest[k] = val
	}
	// fork:begin shards
	v.bucket = internBucket(cm.Labels[shard.BucketLabel])
	// fork:end shards
	if ref := metav1.GetControllerOfNoCopy(cm); ref != nil {
		v.controller = ownerRef{
			apiVersion: intern(ref.APIVersion, bookAPIVersion),
			kind:       intern(ref.Kind, bookGVK.Kind),
			name:       intern(ref.Name, cm.Name),
			uid:        ref.UID,
		}
		v.hasController = true
	}
	return v
}

var bookAPIVersion = bookGVK.GroupVersion().String()

// intern returns same in place of s when they are equal, so that s, if
// nothing else holds it, can be collected.
func intern(s, same string) string {
	if s == same {
		return same
	}
	return s
}

// fork:begin shards

// internBucket returns shard.BucketName's string for a bucket label's
// value, and the value itself when it names no bucket.
func internBucket(v string) string {
	if len(v) > 3 {
		return v
	}
	b, err := strconv.Atoi(v)
	if name := shard.BucketName(b); err == nil && name == v {
		return name
	}
	return v
}

// fork:end shards

// shareStrings replaces v's strings with the Book's equal ones, so that
// the decoded ConfigMap's copies can be collected.
func (v *cachedConfigMap) shareStrings(book *webappv2.Book) {
	v.namespace = intern(v.namespace, book.Namespace)
	v.name = intern(v.name, book.Name)
	v.book = intern(v.book, book.Name)
	v.controller.name = intern(v.controller.name, book.Name)
	v.controller.uid = types.UID(intern(string(v.controller.uid), string(book.UID)))
	v.title = intern(v.title, book.Spec.Title)
}

// GetNamespace, GetName and GetResourceVersion are what the event handlers
// read of an object (handlers.go), without the allocation of GetObjectMeta.
func (v *cachedConfigMap) GetNamespace() string       { return v.namespace }
func (v *cachedConfigMap) GetName() string            { return v.name }
func (v *cachedConfigMap) GetResourceVersion() string { return v.resourceVersion }

// GetObjectMeta makes a cachedConfigMap a metav1.ObjectMetaAccessor, which
// is what the informer's key function needs of what it stores. It
// allocates, on each call, an ObjectMeta with the three fields it reads: a
// few short-lived ones per watch event cost less than keeping an
// ObjectMeta, 256 bytes, per cached ConfigMap.
func (v *cachedConfigMap) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: v.namespace, Name: v.name, ResourceVersion: v.resourceVersion}
}

func (v *cachedConfigMap) controllerRef() (ownerRef, bool) { return v.controller, v.hasController }

func (v *cachedConfigMap) isDeleting() bool { return v.deleting }

func (v *cachedConfigMap) holds(desired *corev1.ConfigMap) bool {
	if !v.titleAndPrice || v.title != desired.Data[TitleKey] || v.price != desired.Data[PriceKey] ||
		len(v.rest)+2 != len(desired.Data) {
		return false
	}
	for k, val := range v.rest {
		if want, ok := desired.Data[k]; !ok || want != val {
			return false
		}
	}
	for k, want := range desired.Labels {
		if v.label(k) != want {
			return false
		}
	}
	return true
}

// label returns the value of one of the labels we write, "" for any other.
func (v *cachedConfigMap) label(key string) string {
	switch key {
	case ManagedByLabel:
		return v.managedBy
	case BookLabel:
		return v.book
	// fork:begin shards
	case shard.BucketLabel:
		return v.bucket
		// fork:end shards
	}
	return ""
}
