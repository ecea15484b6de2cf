package manager

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/pkg/controller"
	bookscheme "ydzs.io/book-controller/pkg/generated/clientset/versioned/scheme"
)

// BenchmarkCachedObjectBytes measures what one converged Book and its
// ConfigMap cost in the informer caches: each is encoded as the API server
// sends it (Book as JSON, ConfigMap as protobuf, both with managedFields),
// decoded as the clients decode it, put through the informers' transform and
// added to an indexer with the namespace index, as the factories do. It
// reports heap bytes per cached object, the figure that the cache's share of
// the controller's memory grows by:
//
//	go test ./pkg/manager -run '^$' -bench CachedObjectBytes -benchtime 3x
func BenchmarkCachedObjectBytes(b *testing.B) {
	const n = 10000
	books, configMaps := encodedObjects(b, n)
	bookDecoder := bookscheme.Codecs.UniversalDeserializer()
	cmDecoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var bookBytes, cmBytes float64
	for range b.N {
		bookBytes += cachedBytes(b, books, func(data []byte) (any, error) {
			obj, _, err := bookDecoder.Decode(data, nil, nil)
			return obj, err
		})
		cmBytes += cachedBytes(b, configMaps, func(data []byte) (any, error) {
			obj, _, err := cmDecoder.Decode(data, nil, nil)
			return obj, err
		})
	}
	b.ReportMetric(bookBytes/float64(b.N), "B/Book")
	b.ReportMetric(cmBytes/float64(b.N), "B/ConfigMap")
}

// cachedBytes decodes every object into a fresh indexer and returns the heap
// it holds per object once the garbage is collected.
func cachedBytes(b *testing.B, encoded [][]byte, decode func([]byte) (any, error)) float64 {
	b.Helper()
	before := liveHeap()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, data := range encoded {
		obj, err := decode(data)
		if err != nil {
			b.Fatalf("decoding: %v", err)
		}
		if obj, err = dropManagedFields(obj); err != nil {
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

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// encodedObjects returns n converged Books and their ConfigMaps as the API
// server would send them in one namespace.
func encodedObjects(b *testing.B, n int) (books, configMaps [][]byte) {
	b.Helper()
	const ns = "bench-r1-ours-backlog-1"
	bookEncoder := bookscheme.Codecs.LegacyCodec(webappv1.SchemeGroupVersion)
	cmEncoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	now := metav1.Now()
	yes := true
	for i := range n {
		name := fmt.Sprintf("book-%05d", i)
		bookUID := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		book := &webappv1.Book{
			TypeMeta: metav1.TypeMeta{APIVersion: webappv1.SchemeGroupVersion.String(), Kind: "Book"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: bookUID, Generation: 1,
				ResourceVersion: strconv.Itoa(100000 + 2*i), CreationTimestamp: now,
				ManagedFields: []metav1.ManagedFieldsEntry{
					{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webapp.ydzs.io/v1", Time: &now,
						FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{".":{},"f:price":{},"f:title":{}}}`)}},
					{Manager: controller.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webapp.ydzs.io/v1", Time: &now,
						FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{".":{},"f:conditions":{},"f:configMapName":{},"f:observedGeneration":{}}}`)},
						Subresource: "status"},
				}},
			Spec:   webappv1.BookSpec{Title: "Book number " + strconv.Itoa(i), Price: int32(i % 1000)},
			Status: webappv1.BookStatus{ObservedGeneration: 1, ConfigMapName: name},
		}
		meta.SetStatusCondition(&book.Status.Conditions, metav1.Condition{Type: controller.ConditionReady,
			Status: metav1.ConditionTrue, Reason: controller.ReasonConfigMapReady, ObservedGeneration: 1,
			Message: fmt.Sprintf("ConfigMap %s holds the current spec", name), LastTransitionTime: now})
		cm := &corev1.ConfigMap{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", i)),
				ResourceVersion: strconv.Itoa(100001 + 2*i), CreationTimestamp: now,
				Labels:          map[string]string{controller.ManagedByLabel: controller.ManagedByValue, controller.BookLabel: name},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "webapp.ydzs.io/v1", Kind: "Book", Name: name, UID: bookUID, Controller: &yes, BlockOwnerDeletion: &yes}},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: controller.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
					APIVersion: "v1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:price":{},"f:title":{}},"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:webapp.ydzs.io/book":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"x\"}":{}}}}`)}}}},
			Data: map[string]string{controller.TitleKey: book.Spec.Title, controller.PriceKey: strconv.Itoa(int(book.Spec.Price))},
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
