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
