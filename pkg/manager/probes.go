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
	"fmt"
	"net/http"
)

// probeHandler serves the kubelet's probes:
//   - /healthz: the process is alive. With leader election it fails from the
//     moment leadership is lost until the process exits, and when a leader
//     has gone past its renew deadline without noticing, so the kubelet
//     restarts a replica stuck on its way out (see leader.Fence.Healthy);
//     with shards, only the latter (shard.Replica.Healthy);
//   - /readyz: the informer caches are synced (with shards: those of every
//     shard held), and ready, the manager's other ready checks, says
//     yes. A replica that is not leading is still ready: it is a
//     warm standby, or a spare.
func probeHandler(synced func() bool, healthy, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, fmt.Sprintf("leader election: %v", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
