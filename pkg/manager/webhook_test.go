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

package manager

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"ydzs.io/book-controller/pkg/ui"
	"ydzs.io/book-controller/pkg/webhook"
)

// TestShowConversions: with the live view off, the webhook has no
// observer (not a nil *ui.Recorder, which would panic on the first
// review); with it on, the Recorder counts each review and says the
// webhook is served.
func TestShowConversions(t *testing.T) {
	review := func(h *webhook.Handler) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, webhook.Path, nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Fatalf("GET %s: %d, want 405", webhook.Path, rec.Code)
		}
	}
	m := &manager{}
	off := webhook.NewHandler(nil, 0)
	m.showConversions(off)
	review(off)

	m.ui = ui.NewRecorder(ui.Options{})
	on := webhook.NewHandler(nil, 0)
	m.showConversions(on)
	review(on)
	if c := m.ui.Snapshot(nil).Conversions; !c.Serving || c.Reviews != 1 || c.Results[webhook.ResultBadRequest] != 1 {
		t.Errorf("the live view's conversions: %+v, want served and the one bad request", c)
	}
}
