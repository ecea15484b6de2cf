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

package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Book is a book on sale. The controller mirrors each Book's spec into a
// ConfigMap of the same name and namespace and reports progress in status.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=books,singular=book,shortName=bk,scope=Namespaced
// +kubebuilder:printcolumn:name="Title",type=string,JSONPath=`.spec.title`
// +kubebuilder:printcolumn:name="Price",type=integer,JSONPath=`.spec.price`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Book struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user wants: the book's title and price.
	// +required
	Spec BookSpec `json:"spec"`

	// Status is what the controller last observed and did.
	// +optional
	Status BookStatus `json:"status,omitempty"`
}

// BookSpec is the desired state of a Book.
type BookSpec struct {
	// Title is the book's title, 1 to 256 characters, not only whitespace.
	// It is copied to the "title" key of the Book's ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.trim().size() > 0",message="title must not be only whitespace"
	Title string `json:"title"`

	// Price is the book's price in whole currency units, 0 or more.
	// It is copied, in decimal, to the "price" key of the Book's ConfigMap.
	// +required
	// +kubebuilder:validation:Minimum=0
	Price int32 `json:"price"`
}

// BookStatus is the observed state of a Book, written only by the controller
// through the status subresource.
type BookStatus struct {
	// ObservedGeneration is the metadata.generation of the Book that the
	// controller last acted on; when it equals metadata.generation, the
	// conditions describe the current spec.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are the latest observations of the Book's state. The "Ready"
	// condition is True when the Book's ConfigMap matches its spec.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ConfigMapName is the name of the ConfigMap that holds this Book's data,
	// in the Book's namespace.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty"`
}

// BookList is a list of Books.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type BookList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Books.
	Items []Book `json:"items"`
}
