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
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/pkg/shard"
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
	BookLabel = webappv1.GroupName + "/book"

	// TitleKey is the ConfigMap data key that holds spec.title.
	TitleKey = "title"
	// PriceKey is the ConfigMap data key that holds spec.price in decimal.
	PriceKey = "price"
)

// ManagedBySelector is the label selector of the ConfigMap informer.
var ManagedBySelector = ManagedByLabel + "=" + ManagedByValue

var bookGVK = webappv1.SchemeGroupVersion.WithKind("Book")

// desiredConfigMap renders the ConfigMap a Book should own: same name and
// namespace, the spec in its data, a controller reference so the garbage
// collector deletes it with the Book, and the bucket of the Book's UID
// (shard.BucketLabel), by which a sharded replica's ConfigMap informer
// selects the ConfigMaps of its Books. The bucket label is written with
// any number of shards, even one, so that changing the number needs no
// relabelling: the bucket depends on the UID alone.
func desiredConfigMap(book *webappv1.Book) *corev1.ConfigMap {
	labels := map[string]string{ManagedByLabel: ManagedByValue, shard.BucketLabel: shard.BucketName(shard.BucketOf(book.UID))}
	if len(validation.IsValidLabelValue(book.Name)) == 0 {
		// Otherwise the API server would reject the ConfigMap, forever.
		labels[BookLabel] = book.Name
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            book.Name,
			Namespace:       book.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(book, bookGVK)},
		},
		Data: map[string]string{
			TitleKey: book.Spec.Title,
			PriceKey: strconv.FormatInt(int64(book.Spec.Price), 10),
		},
	}
}

// configMapUpToDate reports whether an observed ConfigMap, as the cache
// keeps it, already carries everything the desired one does. Labels and
// owner references that others added are tolerated; the data belongs to the
// Book and must match exactly. desired is what desiredConfigMap renders: our
// two data keys and at most our three labels.
func configMapUpToDate(observed *cachedConfigMap, desired *corev1.ConfigMap) bool {
	if !observed.onlyTitleAndPrice || observed.title != desired.Data[TitleKey] || observed.price != desired.Data[PriceKey] {
		return false
	}
	if observed.managedBy != desired.Labels[ManagedByLabel] {
		return false
	}
	if want, ok := desired.Labels[BookLabel]; ok && observed.book != want {
		return false
	}
	return observed.bucket == desired.Labels[shard.BucketLabel]
}

// controlledByEarlierBook reports whether cm's controller is a Book of
// book's name but another UID: a Book deleted before book was created with
// its name. The garbage collector looks owners up by UID, so it deletes
// such a ConfigMap (unless another, living owner keeps it); until then it
// holds book's ConfigMap name. A forged reference looks the same, and the
// garbage collector deletes that ConfigMap alike.
func controlledByEarlierBook(cm *cachedConfigMap, book *webappv1.Book) bool {
	ref := cm.controller
	if !cm.hasController || ref.kind != bookGVK.Kind || ref.name != book.Name || ref.uid == book.UID {
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
