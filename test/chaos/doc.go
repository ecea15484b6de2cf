// Package chaos is the fault-injection suite: the Book controller against a
// real local control plane while its API server, etcd, its own process, its
// leader and its namespace are killed or deleted under it, with a second
// writer racing it and with foreign objects in its way. Every test ends by
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
//	chaos: 27 faults injected, 3400 Books checked, 0 lost, 0 duplicated
package chaos
