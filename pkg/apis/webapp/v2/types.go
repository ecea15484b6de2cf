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

package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Book is a book on sale, priced in decimal in a named currency. The
// controller mirrors each Book's spec into a ConfigMap of the same name and
// namespace and reports progress in status.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=books,singular=book,shortName=bk,scope=Namespaced
// +kubebuilder:printcolumn:name="Title",type=string,JSONPath=`.spec.title`
// +kubebuilder:printcolumn:name="Price",type=string,JSONPath=`.spec.price.amount`
// +kubebuilder:printcolumn:name="Currency",type=string,JSONPath=`.spec.price.currency`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Book struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user wants: the book's title, price and authors.
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

	// Price is what the book costs: a decimal amount of an ISO 4217 currency.
	// +required
	Price Price `json:"price"`

	// Authors are the book's authors in the order its cover gives them: at
	// most 16, each 1 to 128 characters and not only whitespace.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:XValidation:rule="self.trim().size() > 0",message="an author must not be only whitespace"
	Authors []string `json:"authors,omitempty"`
}

// Price is an amount of money in one currency. The amount may have no more
// decimal places than the currency's ISO 4217 minor unit: none for JPY, KRW
// and the other currencies without one (and XXX), 3 for BHD, IQD, JOD, KWD,
// LYD, OMR and TND, 4 for CLF and UYW, 2 for every other currency. The
// currency lists below are the table in currency.go, which manifests' tests
// hold them to.
//
// +kubebuilder:validation:XValidation:rule="!(self.currency in ['BIF','CLP','DJF','GNF','ISK','JPY','KMF','KRW','PYG','RWF','UGX','UYI','VND','VUV','XAF','XAG','XAU','XBA','XBB','XBC','XBD','XDR','XOF','XPD','XPF','XPT','XSU','XTS','XUA','XXX']) || !self.amount.contains('.')",messageExpression="'must be a whole number: ' + self.currency + ' has no minor unit'",fieldPath=".amount"
// +kubebuilder:validation:XValidation:rule="!(self.currency in ['BHD','IQD','JOD','KWD','LYD','OMR','TND']) || !self.amount.matches('[.][0-9]{4}')",messageExpression="'must have at most 3 decimal places in ' + self.currency",fieldPath=".amount"
// +kubebuilder:validation:XValidation:rule="self.currency in ['BHD','BIF','CLF','CLP','DJF','GNF','IQD','ISK','JOD','JPY','KMF','KRW','KWD','LYD','OMR','PYG','RWF','TND','UGX','UYI','UYW','VND','VUV','XAF','XAG','XAU','XBA','XBB','XBC','XBD','XDR','XOF','XPD','XPF','XPT','XSU','XTS','XUA','XXX'] || !self.amount.matches('[.][0-9]{3}')",messageExpression="'must have at most 2 decimal places in ' + self.currency",fieldPath=".amount"
type Price struct {
	// Amount is the price in decimal: "19.99", "0", "1200". Digits, then
	// optionally a point and 1 to 4 digits; no sign, no exponent, no
	// leading zeros but "0" itself, at most 15 digits before the point, and
	// no more digits after it than the currency's minor unit allows.
	// +required
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,14})(\.[0-9]{1,4})?$`
	Amount string `json:"amount"`

	// Currency is the ISO 4217 alphabetic code of the amount's currency,
	// from the list in force (EUR, USD, JPY, ...). XXX, ISO 4217's "no
	// currency", is a v1 Book's price: whole units of an unnamed currency.
	// +required
	// +kubebuilder:validation:Enum=AED;AFN;ALL;AMD;AOA;ARS;AUD;AWG;AZN;BAM;BBD;BDT;BHD;BIF;BMD;BND;BOB;BOV;BRL;BSD;BTN;BWP;BYN;BZD;CAD;CDF;CHE;CHF;CHW;CLF;CLP;CNY;COP;COU;CRC;CUP;CVE;CZK;DJF;DKK;DOP;DZD;EGP;ERN;ETB;EUR;FJD;FKP;GBP;GEL;GHS;GIP;GMD;GNF;GTQ;GYD;HKD;HNL;HTG;HUF;IDR;ILS;INR;IQD;IRR;ISK;JMD;JOD;JPY;KES;KGS;KHR;KMF;KPW;KRW;KWD;KYD;KZT;LAK;LBP;LKR;LRD;LSL;LYD;MAD;MDL;MGA;MKD;MMK;MNT;MOP;MRU;MUR;MVR;MWK;MXN;MXV;MYR;MZN;NAD;NGN;NIO;NOK;NPR;NZD;OMR;PAB;PEN;PGK;PHP;PKR;PLN;PYG;QAR;RON;RSD;RUB;RWF;SAR;SBD;SCR;SDG;SEK;SGD;SHP;SLE;SOS;SRD;SSP;STN;SVC;SYP;SZL;THB;TJS;TMT;TND;TOP;TRY;TTD;TWD;TZS;UAH;UGX;USD;USN;UYI;UYU;UYW;UZS;VED;VES;VND;VUV;WST;XAD;XAF;XAG;XAU;XBA;XBB;XBC;XBD;XCD;XCG;XDR;XOF;XPD;XPF;XPT;XSU;XTS;XUA;XXX;YER;ZAR;ZMW;ZWG
	Currency string `json:"currency"`
}

// BookStatus is the observed state of a Book, written only by the controller
// through the status subresource. It is the same in every version.
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
