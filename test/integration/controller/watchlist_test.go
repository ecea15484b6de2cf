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
	"net/url"
	"strings"
	"testing"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestInformersUseStreamingLists confirms that the controller's informers
// fill their caches with streaming lists (WatchList: a watch with
// sendInitialEvents=true, on by default in client-go since v0.35) rather
// than a paged LIST, for Books and for ConfigMaps: the API server then
// streams the objects from its watch cache instead of building one large
// list response, which is what keeps its memory flat while a replica starts
// over many Books.
func TestInformersUseStreamingLists(t *testing.T) {
	ns := env.Namespace(t)
	var counter framework.RequestCounter
	probe := framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, ProbeAddr: probe,
		RESTConfig: counter.Wrap(env.ControllerServiceAccountConfig(t))})
	framework.Eventually(t, "the controller's caches", framework.AnswersOK(probe, "/readyz"))

	for _, resource := range []string{"/books", "/configmaps"} {
		var streams, lists int
		for _, r := range counter.Requests() {
			if r.Method != "GET" || !strings.HasSuffix(r.Path, "/namespaces/"+ns+resource) {
				continue
			}
			q, err := url.ParseQuery(r.Query)
			if err != nil {
				t.Fatalf("query %q: %v", r.Query, err)
			}
			switch {
			case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
				streams++
			case q.Get("watch") != "true":
				lists++
			}
		}
		t.Logf("%s: %d streaming lists, %d LISTs", resource, streams, lists)
		if streams == 0 || lists != 0 {
			t.Errorf("%s: %d streaming lists and %d LISTs, want the cache filled by a streaming list alone", resource, streams, lists)
		}
	}
}
