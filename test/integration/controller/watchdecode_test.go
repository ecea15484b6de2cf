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

package controller_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/watchdecode"
	"ydzs.io/book-controller/test/integration/framework"
)

// TestWatchDecodeMatchesGeneratedClient holds the controller's Book watch
// decoding (pkg/watchdecode) to the generated client's on what a real API
// server sends: a streaming list of Books that the controller made Ready
// (so with the managedFields of two writers), titles that need escaping,
// live edits and deletes after the list, and an expired watch.
func TestWatchDecodeMatchesGeneratedClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns})
	titles := []string{"kubernetes", `"Quoted", back\slash, tab` + "\t", "日本語のタイトル", "</script>\u2028é"}
	for i, title := range titles {
		if _, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, fmt.Sprintf("book-%d", i), title, int32(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range titles {
		env.WaitForReady(t, ns, fmt.Sprintf("book-%d", i), metav1.ConditionTrue, "ConfigMapReady")
	}

	generated, err := versioned.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ours, err := watchdecode.NewClientset(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	stream := metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	watches := map[string]watch.Interface{}
	for name, c := range map[string]versioned.Interface{"generated": generated, "watchdecode": ours} {
		w, err := c.WebappV2().Books(ns).Watch(ctx, stream)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(w.Stop)
		watches[name] = w
	}
	// The initial list and its bookmark, then a delete and an edit, in
	// that order (the controller's status write for the edit comes after
	// both, and is not compared).
	if err := env.Books.WebappV2().Books(ns).Delete(ctx, "book-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	edited, err := env.Books.WebappV2().Books(ns).Get(ctx, "book-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	edited.Spec.Title = `edited "live"`
	if _, err := env.Books.WebappV2().Books(ns).Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := len(titles) + 3
	got := map[string][]watch.Event{}
	for name, w := range watches {
		got[name] = collect(t, name, w, want)
	}
	for i, g := range got["generated"] {
		o := got["watchdecode"][i]
		if g.Type == watch.Bookmark && o.Type == watch.Bookmark {
			// A bookmark carries the server's resourceVersion when each
			// watch's initial list ended; other tests' writes on the shared
			// server can land between the two watches, so it is compared
			// for presence only.
			o.Object, g.Object = withoutResourceVersion(t, o.Object), withoutResourceVersion(t, g.Object)
		}
		if o.Type != g.Type || !equality.Semantic.DeepEqual(o.Object, g.Object) {
			t.Errorf("event %d: watchdecode %s %#v\n generated %s %#v", i, o.Type, o.Object, g.Type, g.Object)
		}
	}
	kinds := ""
	for _, e := range got["watchdecode"] {
		kinds += string(e.Type)[:1]
	}
	if kinds != "AAAABDM" {
		t.Errorf("event types %s, want AAAABDM (Added ×4, Bookmark, Deleted, Modified)", kinds)
	}

	// An expired watch: the server's 410 must reach the reflector as the
	// same error through both clients, so that it lists again.
	old := metav1.ListOptions{ResourceVersion: "1", TimeoutSeconds: ptr.To[int64](5)}
	var results []string
	for _, c := range []versioned.Interface{generated, ours} {
		w, err := c.WebappV2().Books(ns).Watch(ctx, old)
		if err != nil {
			results = append(results, fmt.Sprintf("error %v (expired %v)", err, apierrors.IsResourceExpired(err) || apierrors.IsGone(err)))
			continue
		}
		e := collect(t, "expired", w, 1)[0]
		w.Stop()
		status, _ := e.Object.(*metav1.Status)
		// The message names the server's current resourceVersion, which
		// other tests' writes move between the two watches.
		results = append(results, serverRV.ReplaceAllString(fmt.Sprintf("%s event, Status %+v", e.Type, ptr.Deref(status, metav1.Status{})), "(current)"))
	}
	t.Logf("an expired watch: %s", results[0])
	if results[0] != results[1] {
		t.Errorf("an expired watch: watchdecode gave %s, the generated client %s", results[1], results[0])
	}
}

// serverRV is the "(2045)" of "too old resource version: 1 (2045)".
var serverRV = regexp.MustCompile(`\(\d+\)`)

// collect reads n events from w, or fails t after a minute. Bookmarks
// other than the one that ends the initial list are left out: the API
// server sends them about once a minute, whenever it is due, so they fall
// between the test's writes at moments that depend on the machine's load.
func collect(t *testing.T, name string, w watch.Interface, n int) []watch.Event {
	t.Helper()
	var events []watch.Event
	timeout := time.After(time.Minute)
	for len(events) < n {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("%s: the watch ended after %d events, want %d", name, len(events), n)
			}
			if e.Type == watch.Bookmark && !endsInitialList(e.Object) {
				continue
			}
			events = append(events, e)
		case <-timeout:
			t.Fatalf("%s: %d events in a minute, want %d", name, len(events), n)
		}
	}
	return events
}

// withoutResourceVersion is a copy of a bookmark's object with its
// resourceVersion, which must be set, cleared.
func withoutResourceVersion(t *testing.T, obj runtime.Object) runtime.Object {
	t.Helper()
	obj = obj.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("bookmark object %T: %v", obj, err)
	}
	if m.GetResourceVersion() == "" {
		t.Errorf("bookmark without a resourceVersion: %#v", obj)
	}
	m.SetResourceVersion("")
	return obj
}

// endsInitialList: a bookmark's object carries the annotation that marks the
// end of a streaming list's initial events.
func endsInitialList(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}
