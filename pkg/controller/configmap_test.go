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
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/shard" // fork:line shards
)

func TestDesiredConfigMap(t *testing.T) {
	book := newBook("demo", 7, "Kubernetes Patterns", 0)
	got := desiredConfigMap(book)

	if got.Name != "demo" || got.Namespace != testNamespace {
		t.Errorf("name: got %s/%s, want %s/demo", got.Namespace, got.Name, testNamespace)
	}
	wantData := map[string]string{TitleKey: "Kubernetes Patterns", PriceKey: "0"}
	if !apiequality.Semantic.DeepEqual(got.Data, wantData) {
		t.Errorf("data: got %v, want %v", got.Data, wantData)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/managed-by": "book-controller",
		"webapp.ydzs.io/book":          "demo",
		// fork:begin shards
		// The bucket is the top byte of the FNV-1a hash of the UID
		// "uid-demo" (0x70…), whatever the number of shards.
		"webapp.ydzs.io/shard-bucket": "112",
		// fork:end shards
	}
	if !apiequality.Semantic.DeepEqual(got.Labels, wantLabels) {
		t.Errorf("labels: got %v, want %v", got.Labels, wantLabels)
	}
	if len(got.BinaryData) != 0 || len(got.Annotations) != 0 {
		t.Errorf("unexpected binaryData %v or annotations %v", got.BinaryData, got.Annotations)
	}
	wantRefs := []metav1.OwnerReference{bookControllerRef("demo", "uid-demo")}
	if !apiequality.Semantic.DeepEqual(got.OwnerReferences, wantRefs) {
		t.Errorf("ownerReferences: got %+v, want %+v", got.OwnerReferences, wantRefs)
	}
	if !metav1.IsControlledBy(got, book) {
		t.Error("desired ConfigMap is not controlled by its Book")
	}

}

// TestConfigMapData states the ConfigMap's contract with its consumers
// (docs/behaviour.md): v1's keys for every Book, the v2 price's own keys
// only when "price" does not say it exactly, and the authors when there
// are some.
func TestConfigMapData(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec webappv2.BookSpec
		want map[string]string
	}{
		{"a v1 price", webappv2.BookSpec{Title: "T", Price: webappv2.Price{Amount: "1999", Currency: "XXX"}},
			map[string]string{"title": "T", "price": "1999"}},
		{"the largest v1 price", webappv2.BookSpec{Title: "T", Price: webappv2.WholePrice(2147483647)},
			map[string]string{"title": "T", "price": "2147483647"}},
		{"beyond v1's largest", webappv2.BookSpec{Title: "T", Price: webappv2.Price{Amount: "2147483648", Currency: "XXX"}},
			map[string]string{"title": "T", "price": "2147483647", "amount": "2147483648", "currency": "XXX"}},
		{"decimals round half up", webappv2.BookSpec{Title: "T", Price: webappv2.Price{Amount: "19.5", Currency: "EUR"}},
			map[string]string{"title": "T", "price": "20", "amount": "19.5", "currency": "EUR"}},
		{"a whole amount in a currency", webappv2.BookSpec{Title: "T", Price: webappv2.Price{Amount: "1200", Currency: "JPY"}},
			map[string]string{"title": "T", "price": "1200", "amount": "1200", "currency": "JPY"}},
		{"authors", webappv2.BookSpec{Title: "T", Price: webappv2.WholePrice(0), Authors: []string{"Ann \"A\" Lee", "李"}},
			map[string]string{"title": "T", "price": "0", "authors": `["Ann \"A\" Lee","李"]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := configMapData(&tc.spec); !maps.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConfigMapUpToDate(t *testing.T) {
	book := newBook("demo", 1, "T", 5)
	desired := desiredConfigMap(book)
	tests := []struct {
		name   string
		mutate func(*corev1.ConfigMap)
		want   bool
	}{
		{"identical", func(*corev1.ConfigMap) {}, true},
		{"extra label", func(cm *corev1.ConfigMap) { cm.Labels["team"] = "books" }, true},
		{"annotations", func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"a": "b"} }, true},
		{"extra owner reference", func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "x", UID: "u"})
		}, true},
		{"server-set metadata", func(cm *corev1.ConfigMap) {
			cm.ResourceVersion, cm.UID, cm.Generation = "42", "cm-uid", 0
			cm.CreationTimestamp = metav1.NewTime(t0)
		}, true},
		{"title differs", func(cm *corev1.ConfigMap) { cm.Data[TitleKey] = "X" }, false},
		{"price differs", func(cm *corev1.ConfigMap) { cm.Data[PriceKey] = "05" }, false},
		{"data key missing", func(cm *corev1.ConfigMap) { delete(cm.Data, PriceKey) }, false},
		{"extra data key", func(cm *corev1.ConfigMap) { cm.Data["extra"] = "" }, false},
		{"no data", func(cm *corev1.ConfigMap) { cm.Data = nil }, false},
		{"binaryData", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": nil} }, false},
		{"managed-by label missing", func(cm *corev1.ConfigMap) { delete(cm.Labels, ManagedByLabel) }, false},
		{"book label missing", func(cm *corev1.ConfigMap) { delete(cm.Labels, BookLabel) }, false},
		{"book label wrong", func(cm *corev1.ConfigMap) { cm.Labels[BookLabel] = "other" }, false},
		{"book label empty", func(cm *corev1.ConfigMap) { cm.Labels[BookLabel] = "" }, false},
		// fork:begin shards
		{"bucket label missing", func(cm *corev1.ConfigMap) { delete(cm.Labels, shard.BucketLabel) }, false},
		{"bucket label of another UID", func(cm *corev1.ConfigMap) { cm.Labels[shard.BucketLabel] = "7" }, false},
		{"bucket label not a bucket", func(cm *corev1.ConfigMap) { cm.Labels[shard.BucketLabel] = "0112" }, false},
		// fork:end shards
		{"no labels", func(cm *corev1.ConfigMap) { cm.Labels = nil }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			observed := desired.DeepCopy()
			tt.mutate(observed)
			desiredBefore := desired.DeepCopy()
			// The projection's judgement and the whole object's must agree.
			for _, c := range []struct {
				name     string
				observed observedConfigMap
			}{{"projection", projectConfigMap(observed)}, {"whole", (*wholeConfigMap)(observed)}} {
				if got := c.observed.holds(desired); got != tt.want {
					t.Errorf("%s holds: got %v, want %v", c.name, got, tt.want)
				}
			}
			if !apiequality.Semantic.DeepEqual(desired, desiredBefore) {
				t.Error("holds modified desired")
			}
		})
	}
}

func TestRepairedConfigMap(t *testing.T) {
	book := newBook("demo", 2, "Right", 3)
	desired := desiredConfigMap(book)

	observed := ownConfigMap(book)
	observed.ResourceVersion = "17"
	observed.Data = map[string]string{TitleKey: "Wrong", "extra": "x"}
	observed.BinaryData = map[string][]byte{"blob": {1}}
	observed.Labels = map[string]string{ManagedByLabel: ManagedByValue, "team": "books"}
	observed.Annotations = map[string]string{"note": "keep"}
	observed.OwnerReferences = append(observed.OwnerReferences,
		metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "x", UID: "u"})
	observedBefore := observed.DeepCopy()
	desiredBefore := desired.DeepCopy()

	got := repairedConfigMap(observed, desired)

	if !apiequality.Semantic.DeepEqual(observed, observedBefore) {
		t.Errorf("repairedConfigMap mutated its input:\nbefore %+v\nafter  %+v", observedBefore, observed)
	}
	if !apiequality.Semantic.DeepEqual(desired, desiredBefore) {
		t.Errorf("repairedConfigMap mutated desired")
	}
	if !projectConfigMap(got).holds(desired) {
		t.Errorf("repaired ConfigMap is not up to date: %+v", got)
	}
	if !apiequality.Semantic.DeepEqual(got.Data, desired.Data) {
		t.Errorf("data: got %v, want %v", got.Data, desired.Data)
	}
	if got.BinaryData != nil {
		t.Errorf("binaryData: got %v, want nil", got.BinaryData)
	}
	wantLabels := map[string]string{ManagedByLabel: ManagedByValue, BookLabel: "demo", "team": "books"}
	wantLabels[shard.BucketLabel] = "112" // fork:line shards
	if !apiequality.Semantic.DeepEqual(got.Labels, wantLabels) {
		t.Errorf("labels: got %v, want %v", got.Labels, wantLabels)
	}
	// Everything else, notably the resourceVersion the update is checked
	// against, comes from observed.
	if got.ResourceVersion != "17" || got.Annotations["note"] != "keep" ||
		!apiequality.Semantic.DeepEqual(got.OwnerReferences, observed.OwnerReferences) {
		t.Errorf("metadata not carried over from observed: %+v", got.ObjectMeta)
	}

	// Writing to the result must not reach the input. (Its data map is
	// desired's, which is built afresh for every sync and not shared.)
	got.Labels["new"] = "x"
	got.Annotations["new"] = "x"
	if _, ok := observed.Labels["new"]; ok {
		t.Error("result shares its labels map with observed")
	}
	if _, ok := observed.Annotations["new"]; ok {
		t.Error("result shares its annotations map with observed")
	}

	t.Run("observed without labels", func(t *testing.T) {
		bare := observedBefore.DeepCopy()
		bare.Labels = nil
		got := repairedConfigMap(bare, desired)
		if !apiequality.Semantic.DeepEqual(got.Labels, desired.Labels) {
			t.Errorf("labels: got %v, want %v", got.Labels, desired.Labels)
		}
		if bare.Labels != nil {
			t.Error("repairedConfigMap set labels on its input")
		}
	})
}
