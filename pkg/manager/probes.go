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
//     shard held). A replica that is not leading is still ready: it is a
//     warm standby, or a spare.
func probeHandler(synced func() bool, healthy func() error) http.Handler {
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
		fmt.Fprintln(w, "ok")
	})
	return mux
}
