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
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"ydzs.io/book-controller/test/integration/framework"
)

// TestBurstMakesOneCreateAndOneStatusWritePerBook: the Book and ConfigMap
// watches race each other, and under load the event of a Book's status write
// often arrives before the add event of the ConfigMap created just before
// it. Here the ConfigMap watch lags by 300 ms, so that order is the rule.
// Each Book must still cost exactly one ConfigMap create and one status
// write: no create answered 409 AlreadyExists and read back, no status write
// repeated. That is the own-writes layer's work (pkg/controller/ownwrites.go);
// the test also runs without it and logs what the burst costs then.
func TestBurstMakesOneCreateAndOneStatusWritePerBook(t *testing.T) {
	t.Parallel()
	for _, tracked := range []bool{true, false} {
		t.Run(fmt.Sprintf("own-writes=%v", tracked), func(t *testing.T) {
			t.Parallel()
			const n = 300
			creates, statusWrites, singleReads := burstWrites(t, n, tracked)
			t.Logf("for %d Books with own-writes %v: %d ConfigMap creates, %d status writes, %d ConfigMap reads",
				n, tracked, creates, statusWrites, singleReads)
			if tracked && (creates != n || statusWrites != n || singleReads != 0) {
				t.Errorf("for %d Books: %d ConfigMap creates, %d status writes, %d ConfigMap reads; want %d, %d, 0",
					n, creates, statusWrites, singleReads, n, n)
			}
		})
	}
}

// burstWrites creates n Books for a controller whose ConfigMap watch lags,
// and counts its requests until every Book is Ready and it is quiet.
func burstWrites(t *testing.T, n int, tracked bool) (creates, statusWrites, singleReads int) {
	ns := env.Namespace(t)
	var counter framework.RequestCounter
	opts := framework.ControllerOptions{Namespace: ns, Workers: 64,
		RESTConfig: framework.DelayWatch(counter.Wrap(env.ControllerServiceAccountConfig(t)), "configmaps", 300*time.Millisecond)}
	if tracked {
		opts.On.OwnWrites = true
	} else {
		opts.Off.OwnWrites = true
	}
	env.StartController(t, opts)

	createBooks(t, ns, n)
	framework.Eventually(t, fmt.Sprintf("%d Books Ready", n), allReady(ns, n))
	waitQuiet(t, &counter, 2*time.Second)

	configMaps := "/api/v1/namespaces/" + ns + "/configmaps"
	for _, r := range counter.Requests() {
		switch {
		case r.Method == http.MethodPost && r.Path == configMaps:
			creates++
		case r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/status"):
			statusWrites++
		case r.Method == http.MethodGet && strings.HasPrefix(r.Path, configMaps+"/"):
			singleReads++
		}
	}
	return creates, statusWrites, singleReads
}
