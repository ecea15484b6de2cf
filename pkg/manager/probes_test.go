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
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbeHandler(t *testing.T) {
	var synced bool
	var health error
	var notReady error
	h := probeHandler(func() bool { return synced }, func() error { return health }, func() error { return notReady })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}

	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz of a healthy process: %d, want 200", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the caches sync: %d, want 503", code)
	}
	synced = true
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz once synced: %d, want 200", code)
	}
	notReady = errors.New("an endpoint is not serving yet")
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not serving yet") {
		t.Errorf("/readyz while a ready check fails: %d %q, want 503 saying why", code, body)
	}
	notReady = nil

	health = errors.New("leadership lost (the Lease is held by \"b\" now); exiting")
	code, body := get("/healthz")
	if code != http.StatusInternalServerError || !strings.Contains(body, `held by "b"`) {
		t.Errorf("/healthz after losing leadership: %d %q, want 500 saying why", code, body)
	}
}
