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

// Package chaos is the fault-injection suite: the Book controller against a
// real local control plane while its API server, etcd, its own process, its
// leader and its namespace are killed or deleted under it, with a second
// writer racing it and with foreign objects in its way; and while the
// cluster itself refuses or throttles it: API Priority and Fairness
// answering 429 (throttle_test.go), etcd out of space (nospace_test.go),
// watches expiring after compaction with no watch cache
// (expiredwatch_test.go), admission policies and webhooks that deny, time
// out or mutate (admission_test.go), a full ResourceQuota (quota_test.go),
// and another controller's finalizers (finalizer_test.go). Every test ends by
// checking that nothing was lost or duplicated: each Book Ready with exactly
// one ConfigMap that it controls and that holds its current spec.
//
// The tests are behind the build tag "chaos", so `go test ./...` skips them:
//
//	BOOK_TOOLS_BIN=$(ls -d _output/tools/*/bin) \
//	CHAOS_BOOKS=200 CHAOS_ROUNDS=3 go test -tags chaos -count=1 -v ./test/chaos/
//
// CHAOS_BOOKS (default 1000) is the number of Books per test, CHAOS_ROUNDS
// (default 10) the number of kills of the controller process, CHAOS_SEED
// fixes the random moments (the seed in use is printed), and
// CHAOS_WRITER_DURATION (default 20s) is how long the second writer runs.
// The suite prints one summary line at the end:
//
//	chaos: 27 faults injected, 3400 Books checked, 0 lost, 0 duplicated; takeover 4.1s..5.2s
//	(median 4.6s, n=9); exit after loss 110ms..3.1s (median 2.9s, n=8); 0 writes after loss (4m10s)
//
// Leader election is judged from the API server's audit log: takeover is
// from the fault to the standby's acquisition of the Lease, exit after loss
// from the moment the leader lost it to its exit, and a write after loss is
// one that reached the API server after its writer's last renewal plus the
// renew deadline (or after it released the Lease).
package chaos
