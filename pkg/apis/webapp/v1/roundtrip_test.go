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
	"flag"
	"math"
	"math/rand"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/randfill"

	webappfuzzer "ydzs.io/book-controller/pkg/apis/webapp/fuzzer"
	v1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	v2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

var (
	roundTripIters = flag.Int("roundtrip-iters", 1000,
		"random Books per direction that the round-trip tests convert there and back, "+
			"once through apimachinery's codec round trip and once directly")
	roundTripSeed = flag.Int64("roundtrip-seed", 0, "the round-trip tests' random seed; 0 takes one from the clock and logs it")
)

// seed returns the round-trip tests' seed and logs it, so that a failure
// can be replayed with -roundtrip-seed.
func seed(t *testing.T) int64 {
	s := *roundTripSeed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -roundtrip-seed=%d)", s, s)
	return s
}

// schemeWithInternal is a scheme with v1 and v2 Book, their conversion
// functions, and internal as the group's internal Book. apimachinery's
// round trip fuzzes the internal type, converts it to every external
// version, through JSON and back, and wants the object it started from:
// with v2 internal that is v2 -> v1 -> v2, with v1 internal v1 -> v2 -> v1.
func schemeWithInternal(t *testing.T, internal runtime.Object) (*runtime.Scheme, schema.GroupVersionKind) {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, v2.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	gvk := schema.GroupVersionKind{Group: v2.GroupName, Version: runtime.APIVersionInternal, Kind: "Book"}
	s.AddKnownTypeWithName(gvk, internal)
	if err := s.AddConversionFunc((*v1.Book)(nil), (*v2.Book)(nil), func(a, b any, _ conversion.Scope) error {
		return a.(*v1.Book).ConvertTo(b.(*v2.Book))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddConversionFunc((*v2.Book)(nil), (*v1.Book)(nil), func(a, b any, _ conversion.Scope) error {
		return b.(*v1.Book).ConvertFrom(a.(*v2.Book))
	}); err != nil {
		t.Fatal(err)
	}
	return s, gvk
}

func newFiller(codecs runtimeserializer.CodecFactory, seed int64) *randfill.Filler {
	return fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, webappfuzzer.Funcs), rand.NewSource(seed), codecs)
}

// TestRoundTripV2ThroughV1 converts random valid v2 Books to v1 and back:
// through apimachinery's round trip (v2 -> v1 -> JSON -> v1 -> v2, with its
// checks of deep copy, stable encoding and aliasing), then directly, counting
// the Books that do not come back the same.
func TestRoundTripV2ThroughV1(t *testing.T) {
	testRoundTrip(t, &v2.Book{}, func(f *randfill.Filler) (string, bool) {
		var in, out v2.Book
		var mid v1.Book
		f.Fill(&in)
		_ = mid.ConvertFrom(&in)
		_ = mid.ConvertTo(&out)
		return same(t, &in, &out)
	})
}

// TestRoundTripV1ThroughV2 is TestRoundTripV2ThroughV1 the other way:
// v1 -> v2 -> v1, for v1 Books as v1 clients write them and as the API
// server serves them from v2 (stash annotation included).
func TestRoundTripV1ThroughV2(t *testing.T) {
	testRoundTrip(t, &v1.Book{}, func(f *randfill.Filler) (string, bool) {
		var in, out v1.Book
		var mid v2.Book
		f.Fill(&in)
		_ = in.ConvertTo(&mid)
		_ = out.ConvertFrom(&mid)
		if err := validV2(&mid); err != nil {
			return "v1 -> v2 made a Book the v2 schema refuses: " + err.Error(), false
		}
		return same(t, &in, &out)
	})
}

// testRoundTrip runs apimachinery's round trip with internal as the
// internal Book, then roundTripOnce *roundTripIters times, and fails on any
// difference.
func testRoundTrip(t *testing.T, internal runtime.Object, roundTripOnce func(*randfill.Filler) (string, bool)) {
	s, gvk := schemeWithInternal(t, internal)
	codecs := runtimeserializer.NewCodecFactory(s)
	seed := seed(t)

	saved := *roundtrip.FuzzIters
	*roundtrip.FuzzIters = *roundTripIters
	t.Cleanup(func() { *roundtrip.FuzzIters = saved })
	roundtrip.RoundTripSpecificKindWithoutProtobuf(t, gvk, s, codecs, newFiller(codecs, seed), nil)
	if t.Failed() {
		return
	}

	f := newFiller(codecs, seed+1)
	differences := 0
	for range *roundTripIters {
		if d, ok := roundTripOnce(f); !ok {
			differences++
			if differences <= 3 {
				t.Errorf("not the same after the round trip:\n%s", d)
			}
		}
	}
	t.Logf("round-trip fuzz: %d iterations through apimachinery's round trip, %d direct: %d differences",
		*roundTripIters, *roundTripIters, differences)
}

// same reports whether got is want, as apimachinery's semantic equality and
// as JSON bytes (what the API server stores and sends), and if not, the diff.
func same(t *testing.T, want, got any) (string, bool) {
	t.Helper()
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	gotJSON, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if apiequality.Semantic.DeepEqual(want, got) && string(wantJSON) == string(gotJSON) {
		return "", true
	}
	return diff.Diff(want, got) + "\nwant " + string(wantJSON) + "\ngot  " + string(gotJSON), false
}

// validV2 is what the v2 schema says of a Book's price and authors; its
// agreement with the CRD is manifests' TestGoValidationAgreesWithCRD.
func validV2(b *v2.Book) error {
	if err := v2.ValidatePrice(b.Spec.Price); err != nil {
		return err
	}
	return v2.ValidateAuthors(b.Spec.Authors)
}

// TestV1PriceEditFuzz: random valid v2 Books, served to v1, whose price a v1
// client changes, come back with the new price in the same currency and the
// same authors, never with the stashed amount.
func TestV1PriceEditFuzz(t *testing.T) {
	s, _ := schemeWithInternal(t, &v2.Book{})
	seed := seed(t)
	f := newFiller(runtimeserializer.NewCodecFactory(s), seed)
	rng := rand.New(rand.NewSource(seed))
	edits := 0
	for range *roundTripIters {
		var in v2.Book
		f.Fill(&in)
		var served v1.Book
		_ = served.ConvertFrom(&in)
		edit := []int32{0, 1, math.MaxInt32, rng.Int31()}[rng.Intn(4)]
		if edit == served.Spec.Price {
			continue
		}
		edits++
		served.Spec.Price = edit
		var got v2.Book
		_ = served.ConvertTo(&got)
		want := in.DeepCopy()
		want.Spec.Price.Amount = strconv.Itoa(int(edit))
		if d, ok := same(t, want, &got); !ok {
			t.Fatalf("after a v1 edit of the price to %d:\n%s", edit, d)
		}
	}
	t.Logf("%d edits", edits)
}
