package manager

import (
	"net/http"
	"net/http/pprof"
)

// pprofHandler serves the Go runtime's profiles (net/http/pprof) under
// /debug/pprof/, for --pprof-bind-address, as controller-runtime's
// PprofBindAddress does: how the benchmark's CPU and heap figures were
// explained (docs/benchmark.md). Off by default: profiles show the
// process's internals to whoever can reach the port, and a CPU profile or
// trace costs the process while it runs.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, goroutine, allocs, … by name
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
