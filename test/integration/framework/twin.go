package framework

// TwinTunedArgs are the flags that give the controller-runtime twin
// (examples/controller-runtime) each lever controller-runtime offers that
// book-controller also pulls: managedFields stripped from the cache, only
// labelled ConfigMaps cached, reads that wait for the process's own writes
// (as our own-write tracker, pkg/controller ownWrites, does), status written without a resourceVersion
// precondition, Events over eventQPS (burst eventBurst) dropped, a
// connection for the cache's watches apart from the writes', Book updates
// that leave the generation alone (the echo of its status write among them)
// filtered out, and a /readyz that waits for the caches. Workers and GOGC
// are set apart (--max-concurrent-reconciles, the GOGC environment
// variable).
// docs/benchmark.md tabulates the levers.
func TwinTunedArgs(eventQPS, eventBurst string) []string {
	return []string{
		"--cache-strip-managed-fields",
		"--cache-configmaps-by-label",
		"--read-your-writes",
		"--status-merge-patch",
		"--event-qps", eventQPS, "--event-burst", eventBurst,
		"--readyz-cache-sync",
		"--cache-own-connection",
		"--generation-changed-predicate",
	}
}
