//go:build chaos && linux

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

package chaos_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"ydzs.io/book-controller/test/integration/framework"
)

// config is the scale of the run, from the environment.
var config struct {
	books          int           // CHAOS_BOOKS: Books per test
	rounds         int           // CHAOS_ROUNDS: kills of the controller process
	seed           uint64        // CHAOS_SEED: random moments and choices
	writerDuration time.Duration // CHAOS_WRITER_DURATION: how long the second writer runs
}

var (
	env    *framework.Env
	binary string // the controller binary, built once by TestMain
)

// The run's tally, printed by TestMain after the tests.
var (
	faults     atomic.Int64 // faults injected (kills, outages, deletions)
	checked    atomic.Int64 // Books whose end state was checked
	lost       atomic.Int64 // Books without their Ready ConfigMap in the end, or missing
	duplicated atomic.Int64 // ConfigMaps beyond one per Book, or orphaned

	figuresMu sync.Mutex
	figures   []string // measurements worth a line in the summary

	// Leader election, from the audit log: how long standbys took to take
	// over after a leader's death or loss, how long lost leaders took to
	// exit, and the writes of a replica that reached the API server after
	// it lost its Lease (its last renewal plus the renew deadline): must
	// stay 0.
	leaderMu        sync.Mutex
	takeovers       []time.Duration
	exitsAfterLoss  []time.Duration
	writesAfterLoss atomic.Int64
)

// recordTakeover adds a takeover time to the summary.
func recordTakeover(d time.Duration) {
	leaderMu.Lock()
	defer leaderMu.Unlock()
	takeovers = append(takeovers, d)
}

// recordExitAfterLoss adds the time a lost leader took to exit.
func recordExitAfterLoss(d time.Duration) {
	leaderMu.Lock()
	defer leaderMu.Unlock()
	exitsAfterLoss = append(exitsAfterLoss, d)
}

// spread is "min..max (median M, n)" of ds, or "none".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	return fmt.Sprintf("%v..%v (median %v, n=%d)", r(s[0]), r(s[len(s)-1]), r(s[len(s)/2]), len(s))
}

// figure records a measurement for the summary (and the test's log).
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	figuresMu.Lock()
	figures = append(figures, line)
	figuresMu.Unlock()
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if err := readConfig(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	fmt.Printf("chaos: CHAOS_BOOKS=%d CHAOS_ROUNDS=%d CHAOS_SEED=%d CHAOS_WRITER_DURATION=%s\n",
		config.books, config.rounds, config.seed, config.writerDuration)

	var err error
	if binary, err = framework.BuildController(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	// One control plane for the package; its processes die with this one
	// (parent-death signal) even if Teardown never runs.
	e, err := framework.Setup(true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos: setup:", err)
		return 1
	}
	env = e
	start := time.Now()
	code := m.Run()
	e.Teardown()

	for _, f := range figures {
		fmt.Println("chaos: figure:", f)
	}
	fmt.Printf("chaos: %d faults injected, %d Books checked, %d lost, %d duplicated; takeover %s; exit after loss %s; %d writes after loss (%s)\n",
		faults.Load(), checked.Load(), lost.Load(), duplicated.Load(), spread(takeovers), spread(exitsAfterLoss),
		writesAfterLoss.Load(), time.Since(start).Round(time.Second))
	if code == 0 && lost.Load()+duplicated.Load()+writesAfterLoss.Load() > 0 {
		code = 1
	}
	return code
}

func readConfig() error {
	config.books, config.rounds = 1000, 10
	config.seed = uint64(time.Now().UnixNano())
	config.writerDuration = 20 * time.Second
	for _, v := range []struct {
		name string
		dst  *int
		min  int
	}{{"CHAOS_BOOKS", &config.books, 10}, {"CHAOS_ROUNDS", &config.rounds, 1}} {
		s := os.Getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < v.min {
			return fmt.Errorf("%s=%q: want an integer of at least %d", v.name, s, v.min)
		}
		*v.dst = n
	}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("CHAOS_SEED=%q: want an unsigned integer", s)
		}
		config.seed = n
	}
	if s := os.Getenv("CHAOS_WRITER_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("CHAOS_WRITER_DURATION=%q: want a positive duration such as 20s", s)
		}
		config.writerDuration = d
	}
	return nil
}

// newRand returns the test's random source: the run's seed and the test's
// name, so a test's choices don't depend on which tests ran before it.
func newRand(t *testing.T) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return rand.New(rand.NewPCG(config.seed, h.Sum64()))
}
