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

package manifests

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	webappfuzzer "ydzs.io/book-controller/pkg/apis/webapp/fuzzer"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// v1DeprecationWarning is what the API server says with every v1 request.
const v1DeprecationWarning = "webapp.ydzs.io/v1 Book is deprecated; use webapp.ydzs.io/v2"

// TestCRDV2Versions: crd-v2.yaml serves v1 (deprecated, with the warning)
// and v2 (stored), each with its printer columns, and converts through the
// book-controller-webhook Service.
func TestCRDV2Versions(t *testing.T) {
	crd, _ := loadCRD(t, crdFile)
	var names []string
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"v1", "v2"}) {
		t.Fatalf("%s: versions %q, want [v1 v2]", crdFile, names)
	}
	v1, v2 := crd.Spec.Versions[0], crd.Spec.Versions[1]
	if !v1.Served || v1.Storage || !v1.Deprecated || ptr.Deref(v1.DeprecationWarning, "") != v1DeprecationWarning {
		t.Errorf("%s: v1 served=%v storage=%v deprecated=%v warning=%q, want served, not stored, deprecated with %q",
			crdFile, v1.Served, v1.Storage, v1.Deprecated, ptr.Deref(v1.DeprecationWarning, ""), v1DeprecationWarning)
	}
	if !v2.Served || !v2.Storage || v2.Deprecated {
		t.Errorf("%s: v2 served=%v storage=%v deprecated=%v, want served, stored, not deprecated", crdFile, v2.Served, v2.Storage, v2.Deprecated)
	}
	checkVersion(t, crdFile, v1, v1Columns)
	checkVersion(t, crdFile, v2, v2Columns)

	want := &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig: &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
				Namespace: "book-controller-system", Name: "book-controller-webhook", Path: ptr.To("/convert"), Port: ptr.To[int32](443)}},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if got := crd.Spec.Conversion; got == nil || !equalJSON(t, got, want) {
		t.Errorf("%s: conversion\n  got  %s\n  want %s", crdFile, toJSON(t, got), toJSON(t, want))
	}
}

// TestV1SchemaIsTheSameAsTheLastV1Release's: v1 does not change when v2
// joins it. The release's CRD is read from the repository's history, at
// the commit CHANGELOG.md gives for it.
func TestV1SchemaIsTheSameAsTheLastV1Release(t *testing.T) {
	changelog, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^## \\[(v[0-9.]+)\\].*\n+Commit `([0-9a-f]+)`[^\n]*last release that serves only").FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md names no last v1-only release with its commit (\"Commit `abc1234` ... The last release that serves only\")")
	}
	out, err := exec.Command("git", "show", string(m[2])+":manifests/crd.yaml").Output()
	if err != nil {
		t.Fatalf("git show %s:manifests/crd.yaml (a shallow clone lacks the commit: fetch the history): %v", m[2], err)
	}
	release := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(out, release); err != nil || len(release.Spec.Versions) != 1 {
		t.Fatalf("the CRD of %s: %v, %d versions", m[1], err, len(release.Spec.Versions))
	}
	both, _ := loadCRD(t, crdFile)
	if a, b := release.Spec.Versions[0], both.Spec.Versions[0]; !equalJSON(t, a.Schema, b.Schema) || !equalJSON(t, a.AdditionalPrinterColumns, b.AdditionalPrinterColumns) {
		t.Errorf("v1's schema or columns differ between %s's CRD and %s", m[1], crdFile)
	}
}

// v2Book is an object map of a v2 Book with the given spec, as a client
// sends it.
func v2Book(spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": webappv2.SchemeGroupVersion.String(), "kind": "Book",
		"metadata": map[string]any{"name": "b"},
		"spec":     spec,
	}
}

// TestCurrencyTableMatchesCRD holds the CRD to pkg/apis/webapp/v2's ISO 4217
// table: the currency enum is the table's codes, and for every currency the
// API server accepts an amount with as many decimal places as the currency's
// minor unit and no more. A failure says which marker on Price in
// pkg/apis/webapp/v2/types.go to change.
func TestCurrencyTableMatchesCRD(t *testing.T) {
	crd, internal := loadCRD(t, crdFile)
	codes := webappv2.CurrencyCodes()
	price := crd.Spec.Versions[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties["price"]
	var enum []string
	for _, e := range price.Properties["currency"].Enum {
		enum = append(enum, strings.Trim(string(e.Raw), `"`))
	}
	if !slices.Equal(enum, codes) {
		t.Errorf("%s: the currency enum is not the ISO 4217 table (currency.go); the marker on Price.Currency must be\n// +kubebuilder:validation:Enum=%s",
			crdFile, strings.Join(codes, ";"))
	}

	bv := newBookValidator(t, crdFile, internal)
	for _, code := range codes {
		minor, _ := webappv2.MinorUnits(code)
		for places := 0; places <= webappv2.MaxFractionDigits; places++ {
			amount := "12"
			if places > 0 {
				amount += "." + strings.Repeat("5", places)
			}
			errs, _ := bv.validate(v2Book(map[string]any{"title": "t", "price": map[string]any{"amount": amount, "currency": code}}), true)
			switch {
			case places <= minor && len(errs) > 0:
				t.Errorf("%s %s: rejected, but %s has %d decimal places in the table: %q", amount, code, code, minor, errs)
			case places > minor && len(errs) == 0:
				t.Errorf("%s %s: accepted, but %s has %d decimal places in the table; fix the CEL rules on Price", amount, code, code, minor)
			case places > minor && !slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, "spec.price.amount:") }):
				t.Errorf("%s %s: rejected, but no error names spec.price.amount: %q", amount, code, errs)
			}
		}
	}
}

// TestGoValidationAgreesWithCRD: webappv2.ValidatePrice and ValidateAuthors,
// which the v1 conversion trusts to refuse a stash v2 would refuse, say what
// the API server says of random prices and authors, valid and not.
func TestGoValidationAgreesWithCRD(t *testing.T) {
	_, internal := loadCRD(t, crdFile)
	bv := newBookValidator(t, crdFile, internal)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	codes := webappv2.CurrencyCodes()
	t.Logf("seed %d", seed)

	const n = 3000
	accepted := 0
	for range n {
		p := webappv2.Price{Amount: randomAmount(rng), Currency: randomCurrency(rng, codes)}
		authors := randomAuthors(rng)
		spec := map[string]any{"title": "t", "price": map[string]any{"amount": p.Amount, "currency": p.Currency}}
		if authors != nil {
			list := make([]any, len(authors))
			for i, a := range authors {
				list[i] = a
			}
			spec["authors"] = list
		}
		errs, _ := bv.validate(v2Book(spec), true)
		goErr := webappv2.ValidatePrice(p)
		if goErr == nil {
			goErr = webappv2.ValidateAuthors(authors)
		}
		if (len(errs) == 0) != (goErr == nil) {
			t.Errorf("price %+v, authors %q: the API server says %q, Go says %v", p, authors, errs, goErr)
		}
		if len(errs) == 0 {
			accepted++
		}
	}
	t.Logf("%d random prices and authors, %d accepted", n, accepted)
	if accepted < n/10 || accepted > n*9/10 {
		t.Errorf("%d of %d accepted: the generator tests too little of one side", accepted, n)
	}
}

func randomCurrency(rng *rand.Rand, codes []string) string {
	if rng.Intn(8) == 0 {
		return []string{"", "ZZZ", "eur", "EURO", "BGN", "ANG", " EUR"}[rng.Intn(7)]
	}
	return codes[rng.Intn(len(codes))]
}

// randomAmount returns an amount near the edges of the pattern and the
// decimal places rules: signs, leading zeros, 15 and 16 digits, 0 to 5
// decimal places, exponents, spaces.
func randomAmount(rng *rand.Rand) string {
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.Intn(10))
		}
		return string(b)
	}
	var whole string
	switch rng.Intn(6) {
	case 0:
		whole = "0"
	case 1:
		whole = "0" + digits(1+rng.Intn(3)) // leading zero
	case 2:
		whole = ""
	default:
		whole = string(byte('1'+rng.Intn(9))) + digits(rng.Intn(16)) // up to 16 digits
	}
	amount := whole
	if rng.Intn(3) > 0 {
		amount += "." + digits(rng.Intn(6))
	}
	switch rng.Intn(20) {
	case 0:
		amount = "-" + amount
	case 1:
		amount = "+" + amount
	case 2:
		amount += "e3"
	case 3:
		amount = " " + amount
	case 4:
		amount += " "
	}
	return amount
}

// randomAuthors returns nil or 0 to 17 authors of 0 to 129 characters,
// some only whitespace.
func randomAuthors(rng *rand.Rand) []string {
	if rng.Intn(3) == 0 {
		return nil
	}
	n := rng.Intn(webappv2.MaxAuthors + 2)
	if rng.Intn(2) == 0 {
		n = rng.Intn(4)
	}
	authors := make([]string, n)
	for i := range authors {
		switch rng.Intn(40) {
		case 0:
			authors[i] = ""
		case 1:
			authors[i] = strings.Repeat(" ", 1+rng.Intn(3)) + "\u3000"
		case 2:
			authors[i] = strings.Repeat("é", webappv2.MaxAuthorLength+rng.Intn(2))
		default:
			authors[i] = fmt.Sprintf("Author %d 作者", rng.Intn(1000))
		}
	}
	return authors
}

// TestFuzzedBooksAreValid: the fuzzer funcs the round-trip tests use
// (pkg/apis/webapp/fuzzer) make Books the API server accepts, so that the
// round trip is proven for valid Books and not for something else.
func TestFuzzedBooksAreValid(t *testing.T) {
	_, internal := loadCRD(t, crdFile)
	bv := newBookValidator(t, crdFile, internal)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := fuzzer.FuzzerFor(webappfuzzer.Funcs, rand.NewSource(seed), runtimeserializer.NewCodecFactory(runtime.NewScheme()))
	const n = 500
	for i := range 2 * n {
		var spec any
		apiVersion := webappv1.SchemeGroupVersion.String()
		if i < n {
			var s webappv1.BookSpec
			f.Fill(&s)
			spec = s
		} else {
			var s webappv2.BookSpec
			f.Fill(&s)
			spec = s
			apiVersion = webappv2.SchemeGroupVersion.String()
		}
		var specMap map[string]any
		fromJSON(t, toJSON(t, spec), &specMap)
		obj := map[string]any{"apiVersion": apiVersion, "kind": "Book", "metadata": map[string]any{"name": "b"}, "spec": specMap}
		if errs, _ := bv.validate(obj, true); len(errs) > 0 {
			t.Fatalf("the fuzzer made an invalid %s Book: %q\n%s", apiVersion, errs, toJSON(t, spec))
		}
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fromJSON decodes as the API server decodes a request: integers as int64.
func fromJSON(t *testing.T, data string, v any) {
	t.Helper()
	if err := utiljson.Unmarshal([]byte(data), v); err != nil {
		t.Fatal(err)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	return toJSON(t, a) == toJSON(t, b)
}
