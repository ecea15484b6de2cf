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
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	v2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

const unicodeTitle = "深入剖析 Kubernetes：Ünïcødé 📘 \u3000 العربية"

func v2Book(amount, currency string, authors ...string) *v2.Book {
	b := &v2.Book{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Labels: map[string]string{"l": "1"},
			Annotations: map[string]string{"keep": "me"}, Finalizers: []string{"f"}, Generation: 3, ResourceVersion: "42"},
		Spec: v2.BookSpec{Title: unicodeTitle, Price: v2.Price{Amount: amount, Currency: currency}},
		Status: v2.BookStatus{ObservedGeneration: 2, ConfigMapName: "b",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Synced", Message: "ok"}}},
	}
	if len(authors) > 0 {
		b.Spec.Authors = authors
	}
	return b
}

func toV1(t *testing.T, in *v2.Book) *v1.Book {
	t.Helper()
	before := in.DeepCopy()
	var out v1.Book
	if err := out.ConvertFrom(in); err != nil {
		t.Fatalf("ConvertFrom: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(before, in) {
		t.Fatalf("ConvertFrom changed its source")
	}
	return &out
}

func toV2(t *testing.T, in *v1.Book) *v2.Book {
	t.Helper()
	before := in.DeepCopy()
	var out v2.Book
	if err := in.ConvertTo(&out); err != nil {
		t.Fatalf("ConvertTo: %v", err)
	}
	if !apiequality.Semantic.DeepEqual(before, in) {
		t.Fatalf("ConvertTo changed its source")
	}
	if _, ok := out.Annotations[v1.StashAnnotation]; ok {
		t.Errorf("the v2 Book carries %s: %v", v1.StashAnnotation, out.Annotations)
	}
	return &out
}

// TestV2ToV1Price covers the rounding, the clamping, each currency
// exponent, and when the stash is written; every case converts back to
// the v2 Book it started from.
func TestV2ToV1Price(t *testing.T) {
	for _, c := range []struct {
		name, amount, currency string
		authors                []string
		want                   int32
		stash                  bool
	}{
		{name: "zero", amount: "0", currency: "XXX", want: 0},
		{name: "whole XXX", amount: "100", currency: "XXX", want: 100},
		{name: "largest int32", amount: "2147483647", currency: "XXX", want: math.MaxInt32},
		{name: "one above the largest int32 is clamped", amount: "2147483648", currency: "XXX", want: math.MaxInt32, stash: true},
		{name: "15 digits is clamped", amount: "999999999999999", currency: "XXX", want: math.MaxInt32, stash: true},
		{name: "exponent 0: JPY", amount: "1200", currency: "JPY", want: 1200, stash: true},
		{name: "exponent 2: EUR rounds up", amount: "19.99", currency: "EUR", want: 20, stash: true},
		{name: "exponent 2: EUR rounds down", amount: "19.49", currency: "EUR", want: 19, stash: true},
		{name: "half rounds up", amount: "2.5", currency: "USD", want: 3, stash: true},
		{name: "half of zero rounds up", amount: "0.50", currency: "USD", want: 1, stash: true},
		{name: "below half of zero rounds to zero", amount: "0.49", currency: "USD", want: 0, stash: true},
		{name: "whole amount in EUR", amount: "20", currency: "EUR", want: 20, stash: true},
		{name: "trailing zero is kept", amount: "20.00", currency: "EUR", want: 20, stash: true},
		{name: "exponent 3: KWD", amount: "1.234", currency: "KWD", want: 1, stash: true},
		{name: "exponent 3: BHD rounds up", amount: "0.500", currency: "BHD", want: 1, stash: true},
		{name: "exponent 4: CLF", amount: "12.3456", currency: "CLF", want: 12, stash: true},
		{name: "exponent 4: UYW just below half", amount: "0.4999", currency: "UYW", want: 0, stash: true},
		{name: "largest amount", amount: "999999999999999.9999", currency: "CLF", want: math.MaxInt32, stash: true},
		{name: "rounding up reaches the largest int32", amount: "2147483646.5", currency: "EUR", want: math.MaxInt32, stash: true},
		{name: "rounding up past the largest int32 is clamped", amount: "2147483647.5", currency: "EUR", want: math.MaxInt32, stash: true},
		{name: "authors alone need the stash", amount: "5", currency: "XXX", authors: []string{"Brendan Burns", "Joe Beda"}, want: 5, stash: true},
		{name: "unicode authors", amount: "59", currency: "CNY", authors: []string{"张磊", "Ünïcødé 📘"}, want: 59, stash: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := v2Book(c.amount, c.currency, c.authors...)
			got := toV1(t, in)
			if got.Spec.Price != c.want {
				t.Errorf("v1 price = %d, want %d", got.Spec.Price, c.want)
			}
			if got.Spec.Title != unicodeTitle {
				t.Errorf("title = %q, want %q", got.Spec.Title, unicodeTitle)
			}
			raw, has := got.Annotations[v1.StashAnnotation]
			if has != c.stash {
				t.Errorf("stash annotation present = %v, want %v (%q)", has, c.stash, raw)
			}
			if has {
				var s struct {
					Price   v2.Price `json:"price"`
					Authors []string `json:"authors"`
					V1Price int32    `json:"v1Price"`
				}
				if err := json.Unmarshal([]byte(raw), &s); err != nil {
					t.Fatalf("stash %q: %v", raw, err)
				}
				if s.Price != in.Spec.Price || s.V1Price != c.want || strings.Join(s.Authors, "|") != strings.Join(c.authors, "|") {
					t.Errorf("stash = %+v, want price %+v, authors %q, v1Price %d", s, in.Spec.Price, c.authors, c.want)
				}
			}
			if got.Annotations["keep"] != "me" || got.Labels["l"] != "1" || got.Status.ConfigMapName != "b" ||
				len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "Synced" || got.Generation != 3 {
				t.Errorf("metadata or status not copied: %+v", got)
			}
			back := toV2(t, got)
			if d, ok := same(t, in, back); !ok {
				t.Errorf("v2 -> v1 -> v2 is not the same:\n%s", d)
			}
		})
	}
}

// TestV1ToV2WithoutStash: a v1 client's Book is a price in XXX.
func TestV1ToV2WithoutStash(t *testing.T) {
	for _, price := range []int32{0, 1, 100, math.MaxInt32} {
		in := &v1.Book{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{"keep": "me"}},
			Spec: v1.BookSpec{Title: unicodeTitle, Price: price}}
		got := toV2(t, in)
		want := v2.BookSpec{Title: unicodeTitle, Price: v2.Price{Amount: strconv.Itoa(int(price)), Currency: "XXX"}}
		if !apiequality.Semantic.DeepEqual(got.Spec, want) {
			t.Errorf("price %d: v2 spec = %+v, want %+v", price, got.Spec, want)
		}
		if err := v2.ValidatePrice(got.Spec.Price); err != nil {
			t.Errorf("price %d: the v2 price is invalid: %v", price, err)
		}
		if d, ok := same(t, in, toV1(t, got)); !ok {
			t.Errorf("price %d: v1 -> v2 -> v1 is not the same:\n%s", price, d)
		}
	}
}

// TestV1PriceEditInvalidatesStash: a v1 client that changes the price of a
// Book it read makes the stashed amount stale; the new price wins, in the
// stashed currency, and the authors stay.
func TestV1PriceEditInvalidatesStash(t *testing.T) {
	for _, c := range []struct {
		name, amount, currency string
		authors                []string
		edit                   int32
		wantAmount             string
	}{
		{name: "EUR with decimals", amount: "19.99", currency: "EUR", authors: []string{"A"}, edit: 25, wantAmount: "25"},
		{name: "edited to the rounding's other side", amount: "19.99", currency: "EUR", edit: 19, wantAmount: "19"},
		{name: "edited to zero", amount: "0.99", currency: "USD", edit: 0, wantAmount: "0"},
		{name: "JPY", amount: "1200", currency: "JPY", edit: 1500, wantAmount: "1500"},
		{name: "clamped amount", amount: "999999999999999", currency: "XXX", edit: 7, wantAmount: "7"},
		{name: "authors only", amount: "5", currency: "XXX", authors: []string{"A", "B"}, edit: 6, wantAmount: "6"},
		{name: "KWD", amount: "1.234", currency: "KWD", edit: 2, wantAmount: "2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			served := toV1(t, v2Book(c.amount, c.currency, c.authors...))
			served.Spec.Price = c.edit // what the v1 client changes; the annotation comes back as it read it
			got := toV2(t, served)
			want := v2.Price{Amount: c.wantAmount, Currency: c.currency}
			if got.Spec.Price != want {
				t.Errorf("price = %+v, want %+v: the stashed amount %q must not come back", got.Spec.Price, want, c.amount)
			}
			if strings.Join(got.Spec.Authors, "|") != strings.Join(c.authors, "|") {
				t.Errorf("authors = %q, want %q", got.Spec.Authors, c.authors)
			}
			if err := v2.ValidatePrice(got.Spec.Price); err != nil {
				t.Errorf("the v2 price is invalid: %v", err)
			}
			if again := toV1(t, got); again.Spec.Price != c.edit {
				t.Errorf("served again to v1: price %d, want the edit %d", again.Spec.Price, c.edit)
			}
		})
	}

	t.Run("unchanged price keeps the stash", func(t *testing.T) {
		in := v2Book("19.99", "EUR", "A")
		served := toV1(t, in)
		served.Spec.Title = "edited title"
		got := toV2(t, served)
		if got.Spec.Price != in.Spec.Price || len(got.Spec.Authors) != 1 || got.Spec.Title != "edited title" {
			t.Errorf("got spec %+v, want the stashed price and authors with the new title", got.Spec)
		}
	})
}

// TestMalformedStashIsIgnored: a stash that is not one v2->v1 could have
// written is treated as absent, and still never reaches the v2 Book.
func TestMalformedStashIsIgnored(t *testing.T) {
	for name, raw := range map[string]string{
		"not JSON":                  "19.99 EUR",
		"empty":                     "",
		"JSON null":                 "null",
		"an array":                  `[1]`,
		"no v1Price":                `{"price":{"amount":"19.99","currency":"EUR"}}`,
		"no price":                  `{"v1Price":7}`,
		"unknown field":             `{"price":{"amount":"19.99","currency":"EUR"},"v1Price":7,"isbn":"x"}`,
		"key in another case":       `{"Price":{"amount":"19.99","currency":"EUR"},"v1Price":7}`,
		"duplicate key":             `{"price":{"amount":"1","currency":"EUR"},"price":{"amount":"19.99","currency":"EUR"},"v1Price":7}`,
		"trailing data":             `{"price":{"amount":"19.99","currency":"EUR"},"v1Price":7} x`,
		"unknown currency":          `{"price":{"amount":"19.99","currency":"ZZZ"},"v1Price":7}`,
		"too many decimals for JPY": `{"price":{"amount":"19.99","currency":"JPY"},"v1Price":7}`,
		"fraction in XXX":           `{"price":{"amount":"7.5","currency":"XXX"},"v1Price":7}`,
		"negative amount":           `{"price":{"amount":"-7","currency":"EUR"},"v1Price":7}`,
		"leading zero":              `{"price":{"amount":"07","currency":"EUR"},"v1Price":7}`,
		"16 integer digits":         `{"price":{"amount":"1000000000000000","currency":"EUR"},"v1Price":7}`,
		"v1Price beyond int32":      `{"price":{"amount":"19.99","currency":"EUR"},"v1Price":2147483648}`,
		"v1Price a string":          `{"price":{"amount":"19.99","currency":"EUR"},"v1Price":"7"}`,
		"blank author":              `{"price":{"amount":"19.99","currency":"EUR"},"authors":[" "],"v1Price":7}`,
		"empty author":              `{"price":{"amount":"19.99","currency":"EUR"},"authors":[""],"v1Price":7}`,
		"author of 129 characters":  `{"price":{"amount":"19.99","currency":"EUR"},"authors":["` + strings.Repeat("é", 129) + `"],"v1Price":7}`,
		"17 authors":                `{"price":{"amount":"19.99","currency":"EUR"},"authors":[` + strings.Repeat(`"a",`, 16) + `"a"],"v1Price":7}`,
	} {
		t.Run(name, func(t *testing.T) {
			in := &v1.Book{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{v1.StashAnnotation: raw}},
				Spec: v1.BookSpec{Title: "t", Price: 7}}
			got := toV2(t, in)
			want := v2.BookSpec{Title: "t", Price: v2.Price{Amount: "7", Currency: "XXX"}}
			if !apiequality.Semantic.DeepEqual(got.Spec, want) {
				t.Errorf("v2 spec = %+v, want %+v", got.Spec, want)
			}
			if got.Annotations != nil {
				t.Errorf("annotations = %v, want none", got.Annotations)
			}
		})
	}

	t.Run("the well-formed stash these are broken from is read", func(t *testing.T) {
		in := &v1.Book{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: map[string]string{
			v1.StashAnnotation: `{"price":{"amount":"19.99","currency":"EUR"},"authors":["` + strings.Repeat("é", 128) + `"],"v1Price":7}`}},
			Spec: v1.BookSpec{Title: "t", Price: 7}}
		if got := toV2(t, in); got.Spec.Price != (v2.Price{Amount: "19.99", Currency: "EUR"}) || len(got.Spec.Authors) != 1 {
			t.Errorf("v2 spec = %+v, want 19.99 EUR and one author", got.Spec)
		}
	})
}

// TestStashAnnotationHandling: the stash is the only annotation conversion
// touches.
func TestStashAnnotationHandling(t *testing.T) {
	t.Run("v1 -> v2 removes it and leaves no empty map", func(t *testing.T) {
		served := toV1(t, &v2.Book{Spec: v2.BookSpec{Title: "t", Price: v2.Price{Amount: "1.5", Currency: "EUR"}}})
		if len(served.Annotations) != 1 {
			t.Fatalf("annotations = %v, want the stash alone", served.Annotations)
		}
		if got := toV2(t, served); got.Annotations != nil {
			t.Errorf("annotations = %#v, want nil", got.Annotations)
		}
	})
	t.Run("v2 -> v1 replaces a stale one", func(t *testing.T) {
		in := v2Book("1.5", "EUR")
		in.Annotations[v1.StashAnnotation] = `{"price":{"amount":"9","currency":"JPY"},"v1Price":9}`
		got := toV1(t, in)
		if !strings.Contains(got.Annotations[v1.StashAnnotation], `"amount":"1.5"`) || got.Annotations["keep"] != "me" {
			t.Errorf("annotations = %v, want the stash of 1.5 EUR and keep=me", got.Annotations)
		}
	})
	t.Run("v2 -> v1 removes a stale one when v1 says it all", func(t *testing.T) {
		in := v2Book("9", "XXX")
		in.Annotations[v1.StashAnnotation] = `{"price":{"amount":"9","currency":"JPY"},"v1Price":9}`
		got := toV1(t, in)
		if _, ok := got.Annotations[v1.StashAnnotation]; ok || got.Annotations["keep"] != "me" {
			t.Errorf("annotations = %v, want keep=me alone", got.Annotations)
		}
	})
}

// TestConversionSharesNoMemory: changing a converted Book leaves its source
// as it was, both ways.
func TestConversionSharesNoMemory(t *testing.T) {
	in := v2Book("19.99", "EUR", "A", "B")
	before := in.DeepCopy()
	out := toV1(t, in)
	out.Annotations["x"] = "y"
	out.Labels["l"] = "2"
	out.Finalizers[0] = "g"
	out.Status.Conditions[0].Reason = "Changed"
	if d, ok := same(t, before, in); !ok {
		t.Errorf("changing the v1 Book changed its v2 source:\n%s", d)
	}

	served := toV1(t, in)
	servedBefore := served.DeepCopy()
	back := toV2(t, served)
	back.Spec.Authors[0] = "Z"
	back.Labels["l"] = "3"
	back.Status.Conditions[0].Message = "changed"
	if d, ok := same(t, servedBefore, served); !ok {
		t.Errorf("changing the v2 Book changed its v1 source:\n%s", d)
	}
}
