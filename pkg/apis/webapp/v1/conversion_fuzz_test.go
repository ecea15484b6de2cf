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

package v1_test

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	v2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// FuzzV2ToV1AndBack converts v2 Books with any price and authors, valid or
// not: conversion never panics; a Book the v2 schema accepts comes back the
// same, gets a v1 price in 0..MaxInt32, and after a v1 client's edit of that
// price comes back with the edit, its currency and its authors; any other
// Book comes back as it was or as the v1 price in XXX.
func FuzzV2ToV1AndBack(f *testing.F) {
	for _, s := range []struct {
		amount, currency, authors string
		edit                      int32
	}{
		{"19.99", "EUR", "Brendan Burns\x00Joe Beda", 25},
		{"2147483648", "XXX", "", 0},
		{"999999999999999.9999", "CLF", "", 1},
		{"0.5", "JPY", "", 1},
		{"-5", "XXX", "", 5},
		{"1e5", "EUR", " ", 5},
		{"", "", "", 0},
	} {
		f.Add(s.amount, s.currency, s.authors, s.edit)
	}
	f.Fuzz(func(t *testing.T, amount, currency, authors string, edit int32) {
		if !utf8.ValidString(amount + currency + authors) {
			return // JSON, from which every Book comes, holds only UTF-8
		}
		in := &v2.Book{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{"keep": "me"}},
			Spec:       v2.BookSpec{Title: "t", Price: v2.Price{Amount: amount, Currency: currency}},
		}
		if authors != "" {
			in.Spec.Authors = strings.Split(authors, "\x00")
		}
		valid := v2.ValidatePrice(in.Spec.Price) == nil && v2.ValidateAuthors(in.Spec.Authors) == nil
		served := toV1(t, in)
		back := toV2(t, served)
		if !valid {
			fallback := v2.BookSpec{Title: "t", Price: v2.Price{Amount: strconv.Itoa(int(served.Spec.Price)), Currency: v2.NoCurrency}}
			if _, ok := same(t, in, back); !ok {
				if _, ok := same(t, fallback, back.Spec); !ok {
					t.Fatalf("invalid %+v came back as %+v, neither itself nor %+v", in.Spec, back.Spec, fallback)
				}
			}
			return
		}
		if d, ok := same(t, in, back); !ok {
			t.Fatalf("v2 -> v1 -> v2 is not the same:\n%s", d)
		}
		if served.Spec.Price < 0 {
			t.Fatalf("v1 price %d of %q is negative", served.Spec.Price, amount)
		}
		if edit == served.Spec.Price || edit < 0 {
			return
		}
		served.Spec.Price = edit
		edited := toV2(t, served)
		want := v2.Price{Amount: strconv.Itoa(int(edit)), Currency: currency}
		if edited.Spec.Price != want || strings.Join(edited.Spec.Authors, "\x00") != authors {
			t.Fatalf("after a v1 edit to %d: spec %+v, want price %+v and authors %q", edit, edited.Spec, want, in.Spec.Authors)
		}
	})
}

// FuzzV1ToV2 converts v1 Books with any price and any stash annotation:
// conversion never panics, the stash never reaches the v2 Book, and a v1
// Book the v1 schema accepts (price 0 or more) becomes a v2 Book whatever
// its annotation says: a v1 client cannot write a v2 Book that a v2
// client could not.
func FuzzV1ToV2(f *testing.F) {
	f.Add(int32(20), `{"price":{"amount":"19.99","currency":"EUR"},"authors":["A"],"v1Price":20}`)
	f.Add(int32(25), `{"price":{"amount":"19.99","currency":"EUR"},"v1Price":20}`)
	f.Add(int32(7), `{"price":{"amount":"7.5","currency":"XXX"},"v1Price":7}`)
	f.Add(int32(-1), `not json`)
	f.Add(int32(math.MaxInt32), `{"price":{"amount":"1","currency":"ZZZ"},"v1Price":2147483647}`)
	f.Fuzz(func(t *testing.T, price int32, stash string) {
		if !utf8.ValidString(stash) {
			return // JSON, from which every Book comes, holds only UTF-8
		}
		in := &v1.Book{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{v1.StashAnnotation: stash}},
			Spec: v1.BookSpec{Title: "t", Price: price}}
		out := toV2(t, in)
		if price < 0 {
			return
		}
		if err := v2.ValidatePrice(out.Spec.Price); err != nil {
			t.Fatalf("price %d with stash %q: invalid v2 price: %v", price, stash, err)
		}
		if err := v2.ValidateAuthors(out.Spec.Authors); err != nil {
			t.Fatalf("price %d with stash %q: invalid v2 authors: %v", price, stash, err)
		}
	})
}
