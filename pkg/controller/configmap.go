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
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/shard" // fork:line shards
)

const (
	// ManagedByLabel marks the ConfigMaps this controller writes. The
	// ConfigMap informer selects on it, so the cache never holds anybody
	// else's ConfigMaps.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel on our ConfigMaps.
	ManagedByValue = "book-controller"
	// BookLabel names the Book a ConfigMap belongs to, for `kubectl get -l`.
	// A Book name may have up to 253 characters, a label value only 63: a
	// ConfigMap of a Book with a longer name goes without this label.
	BookLabel = webappv2.GroupName + "/book"

	// TitleKey is the ConfigMap data key that holds spec.title.
	TitleKey = "title"
	// PriceKey is the ConfigMap data key that holds the price in whole units
	// (v2.Price.WholeUnits), what v1's spec.price says: the key a v1
	// consumer reads, kept for every Book.
	PriceKey = "price"
	// AmountKey and CurrencyKey hold spec.price.amount and .currency for a
	// price that PriceKey does not say exactly (v2.Price.IsWholeUnits is
	// false). A price v1 can say leaves them out, so that upgrading from a
	// v1-only release rewrites no ConfigMap and an old and a new controller
	// overlapping in a rolling update write the same data.
	AmountKey   = "amount"
	CurrencyKey = "currency"
	// AuthorsKey holds spec.authors as a JSON array of strings, when there
	// are any.
	AuthorsKey = "authors"
)

// ManagedBySelector is the label selector of the ConfigMap informer.
var ManagedBySelector = ManagedByLabel + "=" + ManagedByValue

var bookGVK = webappv2.SchemeGroupVersion.WithKind("Book")

// desiredConfigMap renders the ConfigMap a Book should own: same name and
// namespace, the spec in its data, and a controller reference so the
// garbage collector deletes it with the Book.
func desiredConfigMap(book *webappv2.Book) *corev1.ConfigMap {
	labels := map[string]string{ManagedByLabel: ManagedByValue}
	if len(validation.IsValidLabelValue(book.Name)) == 0 {
		// Otherwise the API server would reject the ConfigMap, forever.
		labels[BookLabel] = book.Name
	}
	// fork:begin shards
	// The bucket of the Book's UID (shard.BucketLabel), by which a sharded
	// replica's ConfigMap informer selects the ConfigMaps of its Books. It
	// is written with any number of shards, even one, so that changing the
	// number needs no relabelling: the bucket depends on the UID alone.
	labels[shard.BucketLabel] = shard.BucketName(shard.BucketOf(book.UID))
	// fork:end shards
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            book.Name,
			Namespace:       book.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(book, bookGVK)},
		},
		Data: configMapData(&book.Spec),
	}
}

// configMapData is the data of a Book's ConfigMap: the contract with its
// consumers that docs/behaviour.md states.
func configMapData(spec *webappv2.BookSpec) map[string]string {
	data := map[string]string{
		TitleKey: spec.Title,
		PriceKey: strconv.FormatInt(int64(spec.Price.WholeUnits()), 10),
	}
	if !spec.Price.IsWholeUnits() {
		data[AmountKey] = spec.Price.Amount
		data[CurrencyKey] = spec.Price.Currency
	}
	if len(spec.Authors) > 0 {
		// A list of strings always marshals.
		authors, _ := json.Marshal(spec.Authors)
		data[AuthorsKey] = string(authors)
	}
	return data
}

// observedConfigMap is what the sync judges of an existing ConfigMap of a
// Book's name: the whole object (wholeConfigMap) or what the ConfigMap
// projection keeps of it (configmapprojection.go).
type observedConfigMap interface {
	// controllerRef returns the controller owner reference, if any.
	controllerRef() (ownerRef, bool)
	// isDeleting reports whether metadata.deletionTimestamp is set.
	isDeleting() bool
	// holds reports whether the ConfigMap already carries everything the
	// desired one does (desiredConfigMap's output): exactly its data, and
	// its labels; labels and owner references others added are tolerated.
	holds(desired *corev1.ConfigMap) bool
}

// ownerRef is an owner reference without its two flags.
type ownerRef struct {
	apiVersion, kind, name string
	uid                    types.UID
}

// judgeConfigMap says what an existing ConfigMap of the Book's name means
// for it: the Ready condition when there is nothing to write, or repair when
// the Book controls the ConfigMap and it differs from the desired one. A
// ConfigMap the Book does not control is never modified.
func judgeConfigMap(book *webappv2.Book, observed observedConfigMap, desired *corev1.ConfigMap) (ready metav1.Condition, repair bool, err error) {
	ref, hasController := observed.controllerRef()
	switch {
	case hasController && earlierBook(ref, book):
		// Not a conflict: the garbage collector is on its way, and the
		// ConfigMap's delete event brings the Book back.
		return earlierBookCondition(book, ref.uid), false, nil
	case !hasController || ref.uid != book.UID:
		return conflictCondition(book), false, nil
	case observed.isDeleting():
		// Held by somebody's finalizer: a write would go with it. Its
		// delete event requeues the Book to create it anew.
		return deletingCondition(book), false, nil
	case observed.holds(desired):
		return readyCondition(book), false, nil
	}
	return metav1.Condition{}, true, nil
}

// earlierBook reports whether a ConfigMap's controller reference names a
// Book of book's name but another UID: a Book deleted before book was
// created with its name. The garbage collector looks owners up by UID, so
// it deletes such a ConfigMap (unless another, living owner keeps it);
// until then it holds book's ConfigMap name. A forged reference looks the
// same, and the garbage collector deletes that ConfigMap alike.
func earlierBook(ref ownerRef, book *webappv2.Book) bool {
	if ref.kind != bookGVK.Kind || ref.name != book.Name || ref.uid == book.UID {
		return false
	}
	// Compare the group only: a reference written through another API
	// version of Book names a Book all the same.
	gv, err := schema.ParseGroupVersion(ref.apiVersion)
	return err == nil && gv.Group == bookGVK.Group
}

// repairedConfigMap returns a copy of observed, which this Book controls, with
// the desired data and labels put back. The input is not modified.
func repairedConfigMap(observed, desired *corev1.ConfigMap) *corev1.ConfigMap {
	cm := observed.DeepCopy()
	cm.Data = desired.Data
	cm.BinaryData = nil
	if cm.Labels == nil {
		cm.Labels = make(map[string]string, len(desired.Labels))
	}
	maps.Copy(cm.Labels, desired.Labels)
	return cm
}

// wholeConfigMap is a ConfigMap as the API server sends it, judged as an
// observedConfigMap: the cache's with the projection off, and what a
// repair reads from the API server.
type wholeConfigMap corev1.ConfigMap

func (cm *wholeConfigMap) controllerRef() (ownerRef, bool) {
	ref := metav1.GetControllerOfNoCopy(cm)
	if ref == nil {
		return ownerRef{}, false
	}
	return ownerRef{apiVersion: ref.APIVersion, kind: ref.Kind, name: ref.Name, uid: ref.UID}, true
}

func (cm *wholeConfigMap) isDeleting() bool { return cm.DeletionTimestamp != nil }

func (cm *wholeConfigMap) holds(desired *corev1.ConfigMap) bool {
	if !maps.Equal(cm.Data, desired.Data) || len(cm.BinaryData) > 0 {
		return false
	}
	for k, v := range desired.Labels {
		if got, ok := cm.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// configMapLister is the classic configMapStore: the informer keeps whole
// ConfigMaps and the sync reads them through client-go's lister, as
// sample-controller reads its Deployments.
type configMapLister struct {
	lister corelisters.ConfigMapLister
}

func (l configMapLister) get(namespace, name string) (observedConfigMap, error) {
	cm, err := l.lister.ConfigMaps(namespace).Get(name)
	switch {
	case err == nil:
		return (*wholeConfigMap)(cm), nil
	case apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, err
}

// transformFunc is nil: the cache keeps ConfigMaps as decoded.
func (configMapLister) transformFunc() cache.TransformFunc { return nil }

// errUnexpectedObject names what a cache held that the controller did not
// put there.
func errUnexpectedObject(where string, obj any) error {
	return fmt.Errorf("unexpected object of type %T in %s", obj, where)
}
