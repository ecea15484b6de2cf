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
	"encoding/json"
	"fmt"

	sigsjson "sigs.k8s.io/json"

	v2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// StashAnnotation is the annotation in which a v1 Book keeps what v1 cannot
// say about its v2 self: the exact price, its currency and the authors, as
// JSON ({"price":{"amount":"19.99","currency":"EUR"},"authors":["..."],
// "v1Price":20}). It is Kubernetes' own way of converting losslessly between
// API versions: the v2->v1 conversion writes it, the v1->v2 conversion reads
// it back and removes it, so that it never appears on a v2 Book. A v2
// client's own annotation of this name is not kept.
const StashAnnotation = "webapp.ydzs.io/v2-fields"

// stash is StashAnnotation's JSON. V1Price is the v1 price written beside it:
// when a v1 client changes the price, the two differ and the stashed amount
// is no longer the truth.
type stash struct {
	Price   v2.Price `json:"price"`
	Authors []string `json:"authors,omitempty"`
	V1Price *int32   `json:"v1Price"`
}

// ConvertTo converts this v1 Book to the hub version, v2, into dst; it is
// controller-runtime's conversion.Convertible.ConvertTo. It is pure: src is
// not changed and dst shares no memory with it. dst's TypeMeta is the
// caller's to set. Metadata and status are copied as they are, except that
// StashAnnotation is never copied. The spec:
//
//   - title: the same;
//   - no StashAnnotation, or one that is not the JSON of a price and authors
//     that v2 accepts: price {amount: the v1 price in decimal, currency:
//     XXX}, no authors;
//   - a stash whose v1Price is the v1 price: the stashed price and authors;
//   - a stash whose v1Price is not the v1 price (a v1 client changed the
//     price since v2->v1 wrote it): amount the v1 price in decimal, never
//     the stashed amount; currency the stashed one, which v1 cannot change;
//     the stashed authors.
//
// It never fails; the error is for conversion.Convertible's signature.
func (src *Book) ConvertTo(dst *v2.Book) error {
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	// The two statuses are the same struct; the conversion would not compile
	// if either changed alone.
	dst.Status = v2.BookStatus(*src.Status.DeepCopy())
	dst.Spec = v2.BookSpec{
		Title: src.Spec.Title,
		Price: v2.WholePrice(src.Spec.Price),
	}
	if s, ok := readStash(dst.Annotations); ok {
		if *s.V1Price == src.Spec.Price {
			dst.Spec.Price = s.Price
		} else {
			dst.Spec.Price.Currency = s.Price.Currency
		}
		dst.Spec.Authors = s.Authors
	}
	deleteAnnotation(&dst.ObjectMeta.Annotations, StashAnnotation)
	return nil
}

// ConvertFrom converts src, a Book of the hub version v2, into this v1 Book;
// it is controller-runtime's conversion.Convertible.ConvertFrom. It is pure:
// src is not changed and dst shares no memory with it. dst's TypeMeta is
// the caller's to set. Metadata and status are copied as they are. The
// spec:
//
//   - title: the same;
//   - price: v2.Price.WholeUnits, the amount rounded half up to a whole
//     number and clamped to an int32;
//   - StashAnnotation: when v1 cannot say the v2 Book exactly (the currency
//     is not XXX, the amount is not that whole number written plainly, or
//     there are authors), the stash with the price, the authors and the v1
//     price written; otherwise none, and a stale one is removed.
//
// It never fails; the error is for conversion.Convertible's signature.
func (dst *Book) ConvertFrom(src *v2.Book) error {
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Status = BookStatus(*src.Status.DeepCopy())
	price := src.Spec.Price.WholeUnits()
	dst.Spec = BookSpec{Title: src.Spec.Title, Price: price}

	if src.Spec.Price.IsWholeUnits() && len(src.Spec.Authors) == 0 {
		deleteAnnotation(&dst.ObjectMeta.Annotations, StashAnnotation)
		return nil
	}
	raw, err := json.Marshal(stash{Price: src.Spec.Price, Authors: src.Spec.Authors, V1Price: &price})
	if err != nil {
		// Strings and an int32 always marshal; this is unreachable.
		return fmt.Errorf("writing the %s annotation: %w", StashAnnotation, err)
	}
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	dst.Annotations[StashAnnotation] = string(raw)
	return nil
}

// readStash returns the stash in annotations if there is one and it is the
// JSON of a stash whose price and authors v2 accepts. Anything else, written
// by hand or by a client that knows no better, is ignored: a v1 client
// cannot put into the v2 Book what a v2 client could not.
func readStash(annotations map[string]string) (stash, bool) {
	raw, ok := annotations[StashAnnotation]
	if !ok {
		return stash{}, false
	}
	var s stash
	// Strict: unknown and duplicate fields, and keys in another case, fail.
	strict, err := sigsjson.UnmarshalStrict([]byte(raw), &s)
	if err != nil || len(strict) > 0 || s.V1Price == nil {
		return stash{}, false
	}
	if v2.ValidatePrice(s.Price) != nil || v2.ValidateAuthors(s.Authors) != nil {
		return stash{}, false
	}
	if len(s.Authors) == 0 {
		s.Authors = nil
	}
	return s, true
}

// deleteAnnotation removes key from *annotations, leaving nil rather than an
// empty map, as a decoded object without annotations has.
func deleteAnnotation(annotations *map[string]string, key string) {
	if _, ok := (*annotations)[key]; !ok {
		return
	}
	delete(*annotations, key)
	if len(*annotations) == 0 {
		*annotations = nil
	}
}
