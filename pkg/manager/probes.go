package manager

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/tools/leaderelection"
)

// probeHandler serves the kubelet's probes:
//   - /healthz: the process is alive; with leader election, also that a
//     leader is not stuck past its lease (client-go's watchdog), so the
//     kubelet restarts a replica that believes it leads but can't renew;
//   - /readyz: the informer caches are synced. A replica that is not leading
//     is still ready: it is a warm standby.
func probeHandler(synced func() bool, leaderWatchdog *leaderelection.HealthzAdaptor) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if leaderWatchdog != nil {
			if err := leaderWatchdog.Check(r); err != nil {
				http.Error(w, fmt.Sprintf("leader election: %v", err), http.StatusInternalServerError)
				return
			}
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
