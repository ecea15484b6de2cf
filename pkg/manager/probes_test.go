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
	h := probeHandler(func() bool { return synced }, func() error { return health })
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

	health = errors.New("leadership lost (the Lease is held by \"b\" now); exiting")
	code, body := get("/healthz")
	if code != http.StatusInternalServerError || !strings.Contains(body, `held by "b"`) {
		t.Errorf("/healthz after losing leadership: %d %q, want 500 saying why", code, body)
	}
}
