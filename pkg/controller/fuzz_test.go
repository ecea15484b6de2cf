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
	"maps"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/shard" // fork:line shards
)

// Fuzz targets for the pure parts of the controller (the desired ConfigMap,
// its comparison and repair, the status) and for key handling in the event
// handlers. Their seeds run with every `go test`; to fuzz one:
//
//	go test ./pkg/controller -run '^$' -fuzz '^FuzzDesiredConfigMap$' -fuzztime 1m

// Seeds shared by the targets: the edges of what the API server accepts for
// a title (1 to 256 characters, any Unicode, control characters included)
// and a price (the whole int32 range; the CRD asks for >= 0, but the
// rendering must not care), and what it does not (invalid UTF-8).
var (
	seedTitles = []string{
		"Kubernetes Patterns",
		"",
		" ",
		strings.Repeat("x", 256),
		strings.Repeat("界", 256),
		strings.Repeat("😀", 256),
		"NUL \x00 inside",
		"\x01\x02\x1b[31mANSI\x1b[0m\x7f\t\n\r",
		"\u202eright-to-left\u202c \u200b \ufeff \u2028",
		"e\u0301 combining",
		"invalid UTF-8 \xff\xfe\xc0\xaf",
		`"quotes" \backslash\ {{template}} ${var}`,
	}
	seedPrices = []int32{0, 1, -1, 1999, math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1}
	seedNames  = []string{
		"demo", "a", "0", "1.2.3", "a.b-c.d",
		strings.Repeat("c", 63), strings.Repeat("b", 64), strings.Repeat("a", 253),
		"", "UPPER", "with/slash", "-leading-dash", strings.Repeat("z", 254), "ünïcode", "a..b",
	}
)

// validBookName reports whether the API server accepts name for a Book:
// custom resources take DNS subdomain names.
func validBookName(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

func FuzzDesiredConfigMap(f *testing.F) {
	for i, title := range seedTitles {
		name := seedNames[i%len(seedNames)]
		f.Add(name, "default", title, seedPrices[i%len(seedPrices)], int64(i), "uid-"+name)
	}
	for i, name := range seedNames {
		f.Add(name, "ns-"+strconv.Itoa(i), "T", seedPrices[i%len(seedPrices)], int64(1), "")
	}
	managedBy := labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})
	f.Fuzz(func(t *testing.T, name, namespace, title string, price int32, generation int64, uid string) {
		book := newBook(name, generation, title, price)
		book.Namespace, book.UID = namespace, types.UID(uid)
		before := book.DeepCopy()

		cm := desiredConfigMap(book)

		if !reflect.DeepEqual(book, before) {
			t.Fatalf("desiredConfigMap modified the Book:\nbefore %+v\nafter  %+v", before, book)
		}
		if cm.Name != name || cm.Namespace != namespace {
			t.Errorf("ConfigMap %s/%s, want %s/%s", cm.Namespace, cm.Name, namespace, name)
		}
		// The title byte for byte: no trimming, escaping or UTF-8 repair.
		if got := cm.Data[TitleKey]; got != title {
			t.Errorf("title: got %q, want %q", got, title)
		}
		// The price in canonical decimal, round-tripping through strconv.
		p, err := strconv.ParseInt(cm.Data[PriceKey], 10, 32)
		if err != nil || int32(p) != price {
			t.Errorf("price %d rendered as %q, which parses as %d (%v)", price, cm.Data[PriceKey], p, err)
		}
		if want := strconv.Itoa(int(price)); cm.Data[PriceKey] != want {
			t.Errorf("price %d rendered as %q, want %q", price, cm.Data[PriceKey], want)
		}
		if len(cm.Data) != 2 || len(cm.BinaryData) != 0 {
			t.Errorf("data %q, binaryData %v: want exactly title and price", cm.Data, cm.BinaryData)
		}
		for k := range cm.Data {
			if errs := validation.IsConfigMapKey(k); len(errs) != 0 {
				t.Errorf("data key %q: %v", k, errs)
			}
		}

		// Labels are valid whatever the name (a Book name that can't be a
		// label value goes without the book label), and the informer's
		// selector finds the ConfigMap.
		if errs := metav1validation.ValidateLabels(cm.Labels, field.NewPath("metadata", "labels")); len(errs) != 0 {
			t.Errorf("labels %q: %v", cm.Labels, errs.ToAggregate())
		}
		if !managedBy.Matches(labels.Set(cm.Labels)) {
			t.Errorf("labels %q do not match the informer's selector %s", cm.Labels, ManagedBySelector)
		}
		if v, ok := cm.Labels[BookLabel]; ok && v != name {
			t.Errorf("%s=%q, want the Book's name %q", BookLabel, v, name)
		}
		if validBookName(name) && len(name) <= validation.LabelValueMaxLength && cm.Labels[BookLabel] != name {
			t.Errorf("Book %q: labels %q lack %s", name, cm.Labels, BookLabel)
		}
		// fork:begin shards
		if want := shard.BucketName(shard.BucketOf(book.UID)); cm.Labels[shard.BucketLabel] != want {
			t.Errorf("labels %q: want %s=%s, the bucket of UID %s", cm.Labels, shard.BucketLabel, want, book.UID)
		}
		// fork:end shards
		if len(cm.Labels) > 3 {
			t.Errorf("labels %q: want only ours", cm.Labels)
		}

		// Controlled by the Book, and by nothing else.
		if len(cm.OwnerReferences) != 1 || !metav1.IsControlledBy(cm, book) {
			t.Fatalf("owner references %+v: want one controller reference to the Book", cm.OwnerReferences)
		}
		ref := cm.OwnerReferences[0]
		if ref.APIVersion != "webapp.ydzs.io/v2" || ref.Kind != "Book" || ref.Name != name ||
			ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("owner reference %+v", ref)
		}

		// Deterministic, and up to date with itself.
		again := desiredConfigMap(book)
		if !reflect.DeepEqual(cm, again) {
			t.Errorf("two renderings differ:\n%+v\n%+v", cm, again)
		}
		if !projectConfigMap(cm).holds(again) {
			t.Error("a desired ConfigMap is not up to date with itself")
		}
	})
}

// decodePairs turns a fuzzer string into a map: "k1=v1\nk2=v2...".
func decodePairs(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	return m
}

func FuzzRepairedConfigMap(f *testing.F) {
	f.Add("Right", int32(3), "title=Right\nprice=3", "app.kubernetes.io/managed-by=book-controller\nwebapp.ydzs.io/book=demo", []byte(nil), "", false, false)
	f.Add("Right", int32(3), "title=Wrong\nextra=x", "team=books", []byte{1}, "keep", false, false)
	f.Add("Right", int32(3), "", "", []byte(nil), "", true, true)
	f.Add("", int32(math.MinInt32), "title=\nprice=-2147483648", "webapp.ydzs.io/book=other\napp.kubernetes.io/managed-by=", []byte{}, "x", false, true)
	f.Add(strings.Repeat("界", 256), int32(math.MaxInt32), "title="+strings.Repeat("界", 256)+"\nprice=2147483647", "app.kubernetes.io/managed-by=book-controller\nwebapp.ydzs.io/book=demo\nteam=a", []byte(nil), "", false, false)
	f.Add("NUL \x00", int32(0), "title=NUL \x00\nprice=00", "=\n==", []byte("bin"), "\xff", false, false)
	f.Fuzz(func(t *testing.T, title string, price int32, data, lbls string, binary []byte, annotation string, nilData, nilLabels bool) {
		book := newBook("demo", 1, title, price)
		desired := desiredConfigMap(book)
		observed := ownConfigMap(book)
		observed.ResourceVersion = "17"
		observed.Data = decodePairs(data)
		observed.Labels = decodePairs(lbls)
		if nilData {
			observed.Data = nil
		}
		if nilLabels {
			observed.Labels = nil
		}
		if binary != nil {
			observed.BinaryData = map[string][]byte{"blob": binary}
		}
		if annotation != "" {
			observed.Annotations = map[string]string{"note": annotation}
		}
		observedBefore, desiredBefore := observed.DeepCopy(), desired.DeepCopy()
		wasUpToDate := projectConfigMap(observed).holds(desired)
		// The cache keeps a projection; judged on it, a ConfigMap must be up
		// to date exactly when the whole object is, as the classic cache
		// and a repair judge it.
		if whole := (*wholeConfigMap)(observed).holds(desired); wasUpToDate != whole {
			t.Fatalf("up to date by the cached projection: %v, by the whole ConfigMap: %v\n%+v", wasUpToDate, whole, observed)
		}

		got := repairedConfigMap(observed, desired)

		if !reflect.DeepEqual(observed, observedBefore) {
			t.Fatalf("repairedConfigMap modified observed:\nbefore %+v\nafter  %+v", observedBefore, observed)
		}
		if !reflect.DeepEqual(desired, desiredBefore) {
			t.Fatalf("repairedConfigMap modified desired")
		}
		if !projectConfigMap(got).holds(desired) {
			t.Fatalf("repaired ConfigMap is not up to date: %+v", got)
		}
		if !maps.Equal(got.Data, desired.Data) || len(got.BinaryData) != 0 {
			t.Errorf("data %q binaryData %v, want %q only", got.Data, got.BinaryData, desired.Data)
		}
		// Labels: ours win, everybody else's are kept.
		for k, v := range observed.Labels {
			if _, ours := desired.Labels[k]; !ours && got.Labels[k] != v {
				t.Errorf("label %s=%q of someone else lost: %q", k, v, got.Labels)
			}
		}
		for k, v := range desired.Labels {
			if got.Labels[k] != v {
				t.Errorf("label %s: got %q, want %q", k, got.Labels[k], v)
			}
		}
		union := maps.Clone(observed.Labels)
		if union == nil {
			union = map[string]string{}
		}
		maps.Copy(union, desired.Labels)
		if len(got.Labels) != len(union) {
			t.Errorf("labels %q, want %q", got.Labels, union)
		}
		// Everything else, the resourceVersion the update is checked against
		// included, is observed's.
		gotMeta, obsMeta := got.ObjectMeta.DeepCopy(), observed.ObjectMeta.DeepCopy()
		gotMeta.Labels, obsMeta.Labels = nil, nil
		if !reflect.DeepEqual(gotMeta, obsMeta) {
			t.Errorf("metadata not carried over:\ngot      %+v\nobserved %+v", gotMeta, obsMeta)
		}
		// Repairing an up-to-date ConfigMap changes nothing, and repairing
		// twice is repairing once.
		if wasUpToDate && (!maps.Equal(got.Data, observed.Data) || !maps.Equal(got.Labels, observed.Labels)) {
			t.Errorf("repair of an up-to-date ConfigMap changed it:\n%+v\n%+v", observed, got)
		}
		if twice := repairedConfigMap(got, desired); !maps.Equal(twice.Data, got.Data) || !maps.Equal(twice.Labels, got.Labels) ||
			!reflect.DeepEqual(twice.ObjectMeta.OwnerReferences, got.ObjectMeta.OwnerReferences) {
			t.Errorf("repair is not idempotent:\n%+v\n%+v", got, twice)
		}
		// Writing to the result does not reach the input.
		got.Labels["fuzz-probe"] = "x"
		if got.Annotations != nil {
			got.Annotations["fuzz-probe"] = "x"
		}
		if !reflect.DeepEqual(observed, observedBefore) {
			t.Errorf("the result shares maps with observed")
		}
	})
}

// maxRFC3339Seconds is the last second of year 9999, the last a Time can be
// serialized at.
const maxRFC3339Seconds = 253402300799

func FuzzComputeStatus(f *testing.F) {
	f.Add(int64(1), int64(0), uint8(0), "", int64(0), false, false, int64(t0.Unix()), int64(0))
	f.Add(int64(3), int64(2), uint8(1), ReasonConfigMapReady, int64(t0.Unix()), true, false, int64(t0.Unix()+60), int64(500_000_000))
	f.Add(int64(3), int64(3), uint8(1), ReasonConfigMapReady, int64(t0.Unix()), false, true, int64(t0.Unix()+60), int64(999_999_999))
	f.Add(int64(math.MaxInt64), int64(-1), uint8(2), "\xff", int64(0), true, true, int64(maxRFC3339Seconds), int64(0))
	f.Add(int64(0), int64(math.MinInt64), uint8(3), "Whatever", int64(-1), false, false, int64(-62135596800), int64(1))
	f.Fuzz(func(t *testing.T, generation, prevObserved int64, prevStatus uint8, prevReason string, prevSec int64,
		other, conflict bool, nowSec, nowNsec int64) {
		// Times a condition can carry: whole seconds (as stored) after
		// year 1 began, to the end of 9999. (The zero time itself is
		// "unset" to meta.SetStatusCondition, which then stamps the real
		// clock's time; no clock reads 0001-01-01.)
		const minSec = -62135596800 + 1 // 0001-01-01T00:00:01Z
		clamp := func(s int64) int64 { return minSec + int64(uint64(s-minSec)%uint64(maxRFC3339Seconds-minSec+1)) }
		now := time.Unix(clamp(nowSec), int64(uint64(nowNsec)%1e9)).UTC()
		prevTime := metav1.NewTime(time.Unix(clamp(prevSec), 0).UTC())

		book := newBook("demo", generation, "T", 1)
		book.Status.ObservedGeneration = prevObserved
		statuses := []metav1.ConditionStatus{"", metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
		var prevReady *metav1.Condition
		if s := statuses[prevStatus%4]; s != "" {
			book.Status.Conditions = append(book.Status.Conditions, metav1.Condition{
				Type: ConditionReady, Status: s, Reason: prevReason, Message: "before", LastTransitionTime: prevTime,
			})
			prevReady = book.Status.Conditions[0].DeepCopy()
		}
		otherCond := metav1.Condition{Type: "Other", Status: metav1.ConditionTrue, Reason: "Elsewhere", Message: "kept", LastTransitionTime: prevTime}
		if other {
			book.Status.Conditions = append(book.Status.Conditions, otherCond)
		}
		ready := readyCondition(book)
		if conflict {
			ready = conflictCondition(book)
		}
		before := book.DeepCopy()

		status := computeStatus(book, ready, now)

		if !reflect.DeepEqual(book, before) {
			t.Fatalf("computeStatus modified the Book")
		}
		if status.ObservedGeneration != generation || status.ConfigMapName != "demo" {
			t.Errorf("observedGeneration %d configMapName %q, want %d and demo", status.ObservedGeneration, status.ConfigMapName, generation)
		}
		n := 0
		for _, c := range status.Conditions {
			if c.Type == ConditionReady {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d Ready conditions in %+v", n, status.Conditions)
		}
		got := meta.FindStatusCondition(status.Conditions, ConditionReady)
		if got.Status != ready.Status || got.Reason != ready.Reason || got.Message != ready.Message || got.ObservedGeneration != generation {
			t.Errorf("Ready %+v, want %+v", *got, ready)
		}
		// The transition time moves only with the status, to whole seconds.
		wantTime := now.Truncate(time.Second)
		if prevReady != nil && prevReady.Status == ready.Status {
			wantTime = prevReady.LastTransitionTime.Time
		}
		if !got.LastTransitionTime.Time.Equal(wantTime) {
			t.Errorf("lastTransitionTime %v, want %v (previous %+v)", got.LastTransitionTime, wantTime, prevReady)
		}
		if other {
			if c := meta.FindStatusCondition(status.Conditions, "Other"); c == nil || !reflect.DeepEqual(*c, otherCond) {
				t.Errorf("other condition not kept: %+v", status.Conditions)
			}
		}
		if generation >= 0 {
			if errs := metav1validation.ValidateConditions(status.Conditions, field.NewPath("status", "conditions")); len(errs) != 0 {
				t.Errorf("conditions the API server would reject: %v", errs.ToAggregate())
			}
		}

		// Nothing changed since: the next sync computes an equal status and
		// writes nothing, also after the API server's JSON round trip.
		book.Status = status
		if again := computeStatus(book, ready, now.Add(time.Hour)); !statusEqual(status, again) {
			t.Errorf("unchanged world, different status:\n%+v\n%+v", status, again)
		}
		raw, err := json.Marshal(status)
		if err != nil {
			t.Fatalf("marshalling the status: %v", err)
		}
		var stored webappv2.BookStatus
		if err := json.Unmarshal(raw, &stored); err != nil {
			t.Fatalf("unmarshalling the status: %v", err)
		}
		if !statusEqual(status, stored) {
			t.Errorf("status differs from its JSON round trip:\n%+v\n%+v", status, stored)
		}
	})
}

// FuzzEventHandlerKeys sends Books and ConfigMaps with arbitrary namespace,
// name, UID and resourceVersion strings, bare and in deletion tombstones
// with arbitrary keys, through the event handlers: nothing panics, at most
// one key is queued per event, and the key is the object's own (for a
// ConfigMap, that of the Book of the same name) whenever cache.ObjectName
// can express it.
func FuzzEventHandlerKeys(f *testing.F) {
	for _, name := range seedNames {
		f.Add("default", name, "default/"+name, "uid-"+name, "1", "2", name, "uid-"+name)
	}
	f.Add("", "", "", "", "", "", "", "")
	f.Add("a/b", "c", "a/b/c", "u", "1", "1", "c", "u")
	f.Add("ns", "a/b", "ns/a/b", "u", "1", "2", "a/b", "other")
	f.Add("ns", "demo", "/", "u", "1", "2", "demo", "u")
	f.Add("ns", "demo", "//", "u", "1", "2", "ghost", "u")
	f.Add("ns", "demo", "x/y/z", "", "", "x", "demo", "")
	f.Fuzz(func(t *testing.T, namespace, name, tombstoneKey, uid, rv1, rv2, refName, refUID string) {
		fx := newFixture(t, Options{})
		c := fx.c
		book := &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid), ResourceVersion: rv1}}
		own := cache.ObjectName{Namespace: namespace, Name: name}
		bh := c.bookEventHandler()

		bh.OnAdd(book, false)
		expectQueued(t, c, own)

		changed := book.DeepCopy()
		changed.ResourceVersion = rv2
		bh.OnUpdate(book, changed)
		if rv1 == rv2 {
			expectQueued(t, c)
		} else {
			expectQueued(t, c, own)
		}

		bh.OnDelete(book)
		expectQueued(t, c, own)

		// The tombstone's key is all a deleted object's key comes from.
		roundTrips := !strings.Contains(namespace, "/") && !strings.Contains(name, "/")
		parsed, err := cache.ParseObjectName(own.String())
		if roundTrips && (err != nil || parsed != own) {
			t.Errorf("ParseObjectName(%q) = %v, %v; want %v", own.String(), parsed, err, own)
		}
		bh.OnDelete(cache.DeletedFinalStateUnknown{Key: own.String(), Obj: book})
		if keys := queuedKeys(c); len(keys) > 1 || (roundTrips && (len(keys) != 1 || keys[0] != own)) {
			t.Errorf("tombstone %q queued %v, want [%v]", own.String(), keys, own)
		}
		bh.OnDelete(cache.DeletedFinalStateUnknown{Key: tombstoneKey, Obj: nil})
		keys := queuedKeys(c)
		if want, err := cache.ParseObjectName(tombstoneKey); err != nil {
			if len(keys) != 0 {
				t.Errorf("unparsable tombstone key %q queued %v", tombstoneKey, keys)
			}
		} else if len(keys) != 1 || keys[0] != want {
			t.Errorf("tombstone key %q queued %v, want [%v]", tombstoneKey, keys, want)
		}

		// A ConfigMap leads to the Book of its own namespace and name,
		// whatever Book its controller reference names, with whatever UID.
		fx.addBookToLister(book)
		yes := true
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: rv1,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "webapp.ydzs.io/v2", Kind: "Book", Name: refName, UID: types.UID(refUID), Controller: &yes}}}}
		want := []cache.ObjectName{own}
		ch := c.projectingConfigMapHandler()
		ch.OnAdd(cm, false)
		expectQueued(t, c, want...)
		cmChanged := cm.DeepCopy()
		cmChanged.ResourceVersion = rv2
		ch.OnUpdate(cm, cmChanged)
		if rv1 == rv2 {
			expectQueued(t, c)
		} else {
			expectQueued(t, c, want...)
		}
		ch.OnDelete(cache.DeletedFinalStateUnknown{Key: tombstoneKey, Obj: cm})
		expectQueued(t, c, want...)
		ch.OnDelete(cache.DeletedFinalStateUnknown{Key: tombstoneKey, Obj: book})
		expectQueued(t, c)
	})
}

// FuzzSync runs the whole sync on a Book with an arbitrary valid name,
// title and price against the fake clients: it creates exactly the desired
// ConfigMap, reports Ready, and a second sync over the result writes nothing.
func FuzzSync(f *testing.F) {
	for i, title := range seedTitles {
		f.Add(seedNames[i%len(seedNames)], title, seedPrices[i%len(seedPrices)])
	}
	f.Fuzz(func(t *testing.T, raw, title string, price int32) {
		name := toBookName(raw)
		if !validBookName(name) {
			t.Fatalf("toBookName(%q) = %q, not a valid Book name", raw, name)
		}
		book := newBook(name, 1, title, price)
		fx := newFixture(t, Options{}, book)
		fx.mustSync(name)
		cm := fx.mustGetConfigMap(name)
		if cm.Data[TitleKey] != title || cm.Data[PriceKey] != strconv.Itoa(int(price)) || !metav1.IsControlledBy(cm, book) {
			t.Errorf("ConfigMap %+v does not hold Book %q's spec %q/%d", cm, name, title, price)
		}
		if errs := metav1validation.ValidateLabels(cm.Labels, field.NewPath("metadata", "labels")); len(errs) != 0 {
			t.Errorf("the API server would reject the ConfigMap: %v", errs.ToAggregate())
		}
		fx.expectReady(name, metav1.ConditionTrue, ReasonConfigMapReady)

		fx.addConfigMapToLister(cm)
		fx.feedBackBook(name)
		fx.clearActions()
		fx.mustSync(name)
		fx.expectNoWrites()
	})
}

// toBookName maps any string to a name the API server accepts for a Book,
// keeping its length (up to 253) and its dots where it can, so that the
// fuzzer explores long and dotted names rather than rejected ones.
func toBookName(s string) string {
	b := []byte(strings.ToLower(s))
	if len(b) > 253 {
		b = b[:253]
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			b[i] = 'x'
		}
	}
	// Every dot-separated part must start and end with an alphanumeric.
	parts := strings.Split(string(b), ".")
	for i, p := range parts {
		if p == "" {
			p = "x"
		}
		if p[0] == '-' {
			p = "x" + p[1:]
		}
		if p[len(p)-1] == '-' {
			p = p[:len(p)-1] + "x"
		}
		parts[i] = p
	}
	name := strings.Join(parts, ".")
	if len(name) > 253 {
		name = strings.TrimRight(name[:253], ".-")
		if name == "" || strings.HasSuffix(name, ".") {
			name += "x"
		}
	}
	return name
}
