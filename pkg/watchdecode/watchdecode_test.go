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

package watchdecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned/scheme"
)

// clientGo is what the generated client decodes with.
var clientGo = rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()

// event is one decoded watch event.
type event struct {
	Type   watch.EventType
	Object runtime.Object
}

// decodeStream decodes a JSON watch stream as client-go's REST client does
// (rest.Request.Watch), with the serializers of ns, up to its end or its
// first error.
func decodeStream(ns runtime.NegotiatedSerializer, stream []byte) ([]event, error) {
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, fmt.Errorf("no JSON serializer")
	}
	frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	d := restclientwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer),
		ns.DecoderToVersion(info.Serializer, webappv2.SchemeGroupVersion))
	var events []event
	for {
		typ, obj, err := d.Decode()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		events = append(events, event{typ, obj})
	}
}

// sameAsClientGo fails t unless ours decodes stream into the events
// client-go does, and fails where client-go fails.
func sameAsClientGo(t *testing.T, stream []byte) []event {
	t.Helper()
	want, wantErr := decodeStream(clientGo, stream)
	got, gotErr := decodeStream(NegotiatedSerializer(clientGo), stream)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("stream %.300q: error %v, client-go's %v", stream, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stream %.300q:\n got  %#v\n want %#v", stream, got, want)
	}
	return got
}

// book is a Book as the API server sends it after our controller made it
// Ready: managedFields of its creator and of our status writes.
func book(i int, title string) *webappv2.Book {
	at := metav1.NewTime(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
	return &webappv2.Book{
		TypeMeta: metav1.TypeMeta{APIVersion: "webapp.ydzs.io/v2", Kind: "Book"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("book-%06d", i), Namespace: "shop", UID: types.UID(fmt.Sprintf("4fc93ca2-b99a-4d2c-8b15-%012d", i)),
			ResourceVersion: fmt.Sprint(300000 + i), Generation: 1, CreationTimestamp: at,
			Labels: map[string]string{"shelf": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webapp.ydzs.io/v2", Time: &at,
					FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{".":{},"f:price":{},"f:title":{}}}`)}},
				{Manager: "book-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "webapp.ydzs.io/v2", Time: &at,
					FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{".":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:configMapName":{},"f:observedGeneration":{}}}`)}},
			},
		},
		Spec: webappv2.BookSpec{Title: title, Price: webappv2.WholePrice(int32(i % 1000))},
		Status: webappv2.BookStatus{
			ObservedGeneration: 1, ConfigMapName: fmt.Sprintf("book-%06d", i),
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1,
				LastTransitionTime: at, Reason: "ConfigMapReady", Message: "ConfigMap holds the current spec"}},
		},
	}
}

// line is one watch event as the API server writes it: compact JSON and a
// newline.
func line(t testing.TB, typ watch.EventType, obj any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"type": typ, "object": obj})
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestDecodesAsClientGo(t *testing.T) {
	bookmark := `{"type":"BOOKMARK","object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","metadata":{"annotations":{"k8s.io/initial-events-end":"true"},"resourceVersion":"305259"}}}` + "\n"
	gone := line(t, watch.Error, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (300000)"})
	tricky := book(7, "\"Quoted\", back\\slash, tab\t, é, 日本語, \u2028, </script>")
	pretty, err := json.MarshalIndent(map[string]any{"type": watch.Modified, "object": book(8, "Pretty")}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	huge := book(9, "Huge")
	huge.Annotations = map[string]string{"note": strings.Repeat("x", 200<<10)}

	for _, tc := range []struct {
		name, stream string
		events       int
		fails        bool
	}{
		{name: "added, modified, deleted, bookmark", events: 4,
			stream: line(t, watch.Added, book(1, "One")) + line(t, watch.Modified, book(2, "Two")) + line(t, watch.Deleted, book(3, "Three")) + bookmark},
		{name: "an expired watch's ERROR event carries a Status", events: 1, stream: gone},
		{name: "escapes and Unicode in the object", events: 1, stream: line(t, watch.Added, tricky)},
		{name: "pretty-printed, no newline between events", events: 2, stream: string(pretty) + strings.TrimSpace(line(t, watch.Added, book(4, "Four")))},
		{name: "object before type, spaces around", events: 1,
			stream: ` { "object" : {"apiVersion":"webapp.ydzs.io/v2","kind":"Book","metadata":{"name":"a"}} , "type" : "ADDED" } `},
		{name: "an event larger than the framer's first buffer", events: 1, stream: line(t, watch.Added, huge)},
		{name: "an unknown key in the envelope", events: 1,
			stream: `{"type":"ADDED","extra":[1,{"a":"]"}],"object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","metadata":{"name":"a"}}}`},
		{name: "an escaped key in the envelope", events: 1,
			stream: `{"typ\u0065":"ADDED","object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","metadata":{"name":"a"}}}`},
		{name: "a duplicate type: the last wins", events: 1,
			stream: `{"type":"ADDED","type":"DELETED","object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","metadata":{"name":"a"}}}`},
		{name: "another kind than Book", events: 1,
			stream: `{"type":"ADDED","object":{"apiVersion":"v1","kind":"Status","status":"Failure","code":500}}`},
		{name: "a field of the wrong type", fails: true,
			stream: `{"type":"ADDED","object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","spec":{"price":"ten"}}}`},
		{name: "unknown event type", fails: true,
			stream: `{"type":"ADDEDX","object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book"}}`},
		{name: "null object", fails: true, stream: `{"type":"ADDED","object":null}`},
		{name: "brackets that do not match", events: 1, fails: true, stream: line(t, watch.Added, book(5, "Five")) + `{"type":"ADDED","object":{"a":[}]}`},
		{name: "cut off in the middle of an event", events: 1, fails: true, stream: line(t, watch.Added, book(6, "Six")) + `{"type":"ADDED","object":{"apiVe`},
		{name: "not JSON", fails: true, stream: `HTTP/1.1 500 oops`},
		{name: "empty", stream: ""},
		{name: "whitespace only", stream: " \n\t\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := sameAsClientGo(t, []byte(tc.stream))
			_, err := decodeStream(NegotiatedSerializer(clientGo), []byte(tc.stream))
			if len(events) != tc.events || (err != nil) != tc.fails {
				t.Errorf("%d events, error %v; want %d events, failing %v", len(events), err, tc.events, tc.fails)
			}
		})
	}
}

// TestBookDecodedOnce checks that the objects of Book events come out of
// ours as the Books the server sent, TypeMeta cleared as client-go's watch
// does, and that they take the fast path (a fresh Book each, not the
// fallback).
func TestBookDecodedOnce(t *testing.T) {
	want := book(1, "One")
	data := []byte(line(t, watch.Added, want))
	events := sameAsClientGo(t, data)
	got, ok := events[0].Object.(*webappv2.Book)
	if !ok {
		t.Fatalf("decoded %T, want *Book", events[0].Object)
	}
	want.TypeMeta = metav1.TypeMeta{}
	if !equality.Semantic.DeepEqual(got, want) { // times come back in the local zone
		t.Errorf("decoded %#v\nwant %#v", got, want)
	}
	if _, object, ok := scanEvent(bytes.TrimSpace(data)); !ok || decodeBook(object) == nil {
		t.Errorf("the event did not take the fast path (scanned %v)", ok)
	}
}

// TestShortBuffer reads an event through a buffer smaller than it, as
// client-go's stream decoder does before it grows its buffer: the parts
// must add up to the event.
func TestShortBuffer(t *testing.T) {
	stream := line(t, watch.Added, book(1, "One")) + line(t, watch.Added, book(2, "Two"))
	r := framer{}.NewFrameReader(io.NopCloser(strings.NewReader(stream)))
	var frames []string
	var cur []byte
	p := make([]byte, 100)
	for {
		n, err := r.Read(p)
		cur = append(cur, p[:n]...)
		if err == io.ErrShortBuffer {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, string(cur))
		cur = nil
	}
	if want := strings.Split(strings.TrimSpace(stream), "\n"); !reflect.DeepEqual(frames, want) {
		t.Errorf("frames %q, want %q", frames, want)
	}
}

// FuzzDecode checks the whole layer against client-go on any stream: the
// same events, and an error where client-go has one.
//
//	go test ./pkg/watchdecode -run '^$' -fuzz FuzzDecode -fuzztime 1m
func FuzzDecode(f *testing.F) {
	f.Add([]byte(line(f, watch.Added, book(1, "One")) + line(f, watch.Deleted, book(2, "\"Two\\"))))
	f.Add([]byte(`{"type":"BOOKMARK","object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","metadata":{"resourceVersion":"1"}}}`))
	f.Add([]byte(`{"type":"ERROR","object":{"apiVersion":"v1","kind":"Status","code":410}} {"object":null,"type":"ADDED"}`))
	f.Add([]byte(`{"type":"ADDED","object":{"apiVersion":"webapp.ydzs.io/v2","kind":"Book","spec":{"title":"a\u0000b","price":{"amount":"1e3","currency":"XXX"}}}}`))
	f.Add([]byte(`[{"type":"ADDED"}] {"type":"ADDED","object":{"a":[}]}`))
	f.Fuzz(func(t *testing.T, stream []byte) {
		sameAsClientGo(t, stream)
	})
}

// BenchmarkStream decodes 10,000 Book events as the API server streams
// them to a replica that starts (a streaming list), with client-go's
// decoding and with ours; the package doc gives the figures.
func BenchmarkStream(b *testing.B) {
	var stream strings.Builder
	for i := range 10000 {
		stream.WriteString(line(b, watch.Added, book(i, fmt.Sprint("Book number ", i))))
	}
	data := []byte(stream.String())
	for _, c := range []struct {
		name string
		ns   runtime.NegotiatedSerializer
	}{{"client-go", clientGo}, {"watchdecode", NegotiatedSerializer(clientGo)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				events, err := decodeStream(c.ns, data)
				if err != nil || len(events) != 10000 {
					b.Fatalf("%d events, %v", len(events), err)
				}
			}
		})
	}
}
