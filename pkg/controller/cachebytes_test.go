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
	"bytes"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	bookscheme "ydzs.io/book-controller/pkg/generated/clientset/versioned/scheme"
)

// BenchmarkCachedObjectBytes measures what one converged Book and its
// ConfigMap cost in the informer caches: each is encoded as the API server
// sends it (Book as JSON, ConfigMap as protobuf, both with managedFields),
// decoded as the clients decode it, put through the informers' transform and
// added to an indexer as the informer's: ours without the namespace index
// (pkg/manager's newInformerFactories), controller-runtime's with it. It
// reports heap bytes per cached object, the figure that the cache's share of
// the controller's memory grows by. B/ConfigMap is what the controller's
// projection keeps; B/whole-ConfigMap what a cache of whole ConfigMaps
// without managedFields (twin-tuned's) holds; B/trimmed-ConfigMap what a
// controller-runtime transform could keep at best, whose cache must hold
// ConfigMaps: one with only the fields the sync reads (trimConfigMap):
//
//	go test ./pkg/controller -run '^$' -bench CachedObjectBytes -benchtime 3x
func BenchmarkCachedObjectBytes(b *testing.B) {
	const n = 10000
	books, configMaps := encodedObjects(b, n)
	bookDecoder := bookscheme.Codecs.UniversalDeserializer()
	cmDecoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	decodeBook := func(data []byte) (any, error) {
		obj, _, err := bookDecoder.Decode(data, nil, nil)
		return obj, err
	}
	decodeCM := func(data []byte) (any, error) {
		obj, _, err := cmDecoder.Decode(data, nil, nil)
		return obj, err
	}
	var bookBytes, cmBytes, wholeCMBytes, trimmedCMBytes float64
	for range b.N {
		bookBytes += cachedBytes(b, books, decodeBook, newBookCompactor().transform, cache.Indexers{})
		cmBytes += cachedBytes(b, configMaps, decodeCM, projectOnly, cache.Indexers{})
		wholeCMBytes += cachedBytes(b, configMaps, decodeCM, dropManagedFields, namespaceIndex)
		trimmedCMBytes += cachedBytes(b, configMaps, decodeCM, trimConfigMap, namespaceIndex)
	}
	b.ReportMetric(bookBytes/float64(b.N), "B/Book")
	b.ReportMetric(cmBytes/float64(b.N), "B/ConfigMap")
	b.ReportMetric(wholeCMBytes/float64(b.N), "B/whole-ConfigMap")
	b.ReportMetric(trimmedCMBytes/float64(b.N), "B/trimmed-ConfigMap")
}

// projectOnly is the ConfigMap cache's transform without the strings it
// shares with the cached Book (no Book cache here).
func projectOnly(obj any) (any, error) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		return projectConfigMap(cm), nil
	}
	return obj, nil
}

// namespaceIndex is the index controller-runtime's informers keep.
var namespaceIndex = cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}

// dropManagedFields is the transform controller-runtime offers
// (cache.TransformStripManagedFields): managedFields dropped, the rest kept.
func dropManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// trimConfigMap returns a ConfigMap with only what the controller's
// projection keeps: name, namespace, resourceVersion, deletionTimestamp,
// our two labels, the controller reference and the data. It is the
// smallest cache a transform can give controller-runtime's cache, which
// must hold ConfigMaps.
func trimConfigMap(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: cm.Name, Namespace: cm.Namespace, ResourceVersion: cm.ResourceVersion, DeletionTimestamp: cm.DeletionTimestamp,
	}, Data: cm.Data, BinaryData: cm.BinaryData}
	for _, k := range []string{ManagedByLabel, BookLabel} {
		if v, ok := cm.Labels[k]; ok {
			if trimmed.Labels == nil {
				trimmed.Labels = map[string]string{}
			}
			trimmed.Labels[k] = v
		}
	}
	if ref := metav1.GetControllerOfNoCopy(cm); ref != nil {
		trimmed.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return trimmed, nil
}

// cachedBytes decodes every object, transforms it and adds it to a fresh
// indexer, and returns the heap it holds per object once the garbage is
// collected.
func cachedBytes(b *testing.B, encoded [][]byte, decode func([]byte) (any, error), transform cache.TransformFunc, indexers cache.Indexers) float64 {
	b.Helper()
	before := liveHeap()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, indexers)
	for _, data := range encoded {
		obj, err := decode(data)
		if err != nil {
			b.Fatalf("decoding: %v", err)
		}
		if obj, err = transform(obj); err != nil {
			b.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	after := liveHeap()
	if got := len(store.ListKeys()); got != len(encoded) {
		b.Fatalf("store holds %d objects, want %d", got, len(encoded))
	}
	return float64(after-before) / float64(len(encoded))
}

// encodedObjects returns n converged Books and their ConfigMaps as the API
// server would send them in one namespace.
func encodedObjects(b *testing.B, n int) (books, configMaps [][]byte) {
	b.Helper()
	const ns = "bench-r1-ours-backlog-1"
	bookEncoder := bookscheme.Codecs.LegacyCodec(webappv2.SchemeGroupVersion)
	cmEncoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	now := metav1.Now()
	yes := true
	for i := range n {
		name := fmt.Sprintf("book-%05d", i)
		bookUID := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		book := &webappv2.Book{
			TypeMeta: metav1.TypeMeta{APIVersion: webappv2.SchemeGroupVersion.String(), Kind: "Book"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: bookUID, Generation: 1,
				ResourceVersion: strconv.Itoa(100000 + 2*i), CreationTimestamp: now,
				ManagedFields: []metav1.ManagedFieldsEntry{
					{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webapp.ydzs.io/v2", Time: &now,
						FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{".":{},"f:price":{},"f:title":{}}}`)}},
					{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webapp.ydzs.io/v2", Time: &now,
						FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{".":{},"f:conditions":{},"f:configMapName":{},"f:observedGeneration":{}}}`)},
						Subresource: "status"},
				}},
			Spec:   webappv2.BookSpec{Title: "Book number " + strconv.Itoa(i), Price: webappv2.WholePrice(int32(i % 1000))},
			Status: webappv2.BookStatus{ObservedGeneration: 1, ConfigMapName: name},
		}
		meta.SetStatusCondition(&book.Status.Conditions, metav1.Condition{Type: ConditionReady,
			Status: metav1.ConditionTrue, Reason: ReasonConfigMapReady, ObservedGeneration: 1,
			Message: fmt.Sprintf("ConfigMap %s holds the current spec", name), LastTransitionTime: now})
		cm := &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", i)),
				ResourceVersion: strconv.Itoa(100001 + 2*i), CreationTimestamp: now,
				Labels:          map[string]string{ManagedByLabel: ManagedByValue, BookLabel: name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "webapp.ydzs.io/v2", Kind: "Book", Name: name, UID: bookUID, Controller: &yes, BlockOwnerDeletion: &yes}},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
					APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:price":{},"f:title":{}},"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:webapp.ydzs.io/book":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"x\"}":{}}}}`)}}}},
			Data: map[string]string{TitleKey: book.Spec.Title, PriceKey: strconv.Itoa(int(book.Spec.Price.WholeUnits()))},
		}
		var buf bytes.Buffer
		if err := bookEncoder.Encode(book, &buf); err != nil {
			b.Fatal(err)
		}
		books = append(books, bytes.Clone(buf.Bytes()))
		buf.Reset()
		if err := cmEncoder.Encode(cm, &buf); err != nil {
			b.Fatal(err)
		}
		configMaps = append(configMaps, bytes.Clone(buf.Bytes()))
	}
	return books, configMaps
}
