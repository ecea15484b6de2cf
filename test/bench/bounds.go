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

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"ydzs.io/book-controller/test/integration/framework"
)

// The tests keep two wall-clock bounds, where the time is the feature
// (test/integration/framework/bounds.go): how soon a replica that lost its
// Lease stops, and how soon a standby takes an expired Lease over. Each is
// three times the p99 of its slack on this machine. -bounds measures them:
// it runs the tests that check them, count times, the binary and the
// in-process packages side by side as make test runs them (two control
// planes on the machine), and collects the "bound-sample" lines they log.

// boundsTests are the tests that log bound samples, and the packages.
const boundsTests = "^(TestLeaderElection|TestLeaseTakenLeaderStopsWritingAndReturns|TestLeaseLostDuringDrainCutsItShort)$"

var boundsPackages = []string{"./test/integration/binary/", "./test/integration/controller/"}

// sampleRE matches framework.BoundSample's line.
var sampleRE = regexp.MustCompile(`bound-sample (\S+) (-?[0-9.]+) (\S+)`)

// BoundFigures are one bound's samples and what they give.
type BoundFigures struct {
	Name                string
	Samples             int
	P50Ms, P99Ms, MaxMs float64
	ThreeP99Ms          float64
	SlackMs             float64 // the slack the framework holds the tests to now
	Over                int     // samples over SlackMs
	MinMs               float64
	From                map[string]int // samples per check ("what")
	SamplesMs           []float64
}

// BoundsResult is what -bounds writes to <out>/bounds.json.
type BoundsResult struct {
	Started  string
	Machine  Machine
	Command  string
	Count    int
	Failures int // go test runs that failed (a bound exceeded, or worse)
	Seconds  float64
	Bounds   []BoundFigures
}

// measureBounds runs the bound tests count times and writes bounds.md and
// bounds.json under o.out.
func measureBounds(ctx context.Context, o options, count int) error {
	res := &BoundsResult{Started: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Count: count}
	args := append([]string{"test", "-trimpath", "-tags", "grpcnotrace", "-gcflags=all=-dwarf=false",
		"-count", strconv.Itoa(count), "-timeout", fmt.Sprintf("%dm", 10+3*count), "-v", "-run", boundsTests}, boundsPackages...)
	res.Command = "CGO_ENABLED=0 go " + strings.Join(args, " ")
	logf("bounds: %s", res.Command)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	logPath := filepath.Join(os.TempDir(), fmt.Sprintf("book-bench-bounds-%d.log", time.Now().Unix()))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	samples := map[string][]float64{}
	from := map[string]map[string]int{}
	sc := bufio.NewScanner(io.TeeReader(out, logFile))
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "FAIL") {
			logf("bounds: %s", line)
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		samples[m[1]] = append(samples[m[1]], v)
		if from[m[1]] == nil {
			from[m[1]] = map[string]int{}
		}
		from[m[1]][m[3]]++
	}
	if err := cmd.Wait(); err != nil {
		res.Failures++
		logf("bounds: go test: %v (its output: %s)", err, logPath)
	}
	res.Seconds = time.Since(start).Seconds()
	slacks := map[string]time.Duration{framework.SampleLeaseLossExit: framework.LeaseLossExitSlack, framework.SampleTakeover: framework.TakeoverSlack}
	for _, name := range slices.Sorted(maps.Keys(samples)) {
		res.Bounds = append(res.Bounds, figures(name, samples[name], from[name], slacks[name]))
	}
	if len(res.Bounds) == 0 {
		return fmt.Errorf("no bound samples in the output of %s (%s)", res.Command, logPath)
	}
	return writeBounds(o.out, res)
}

// figures are the percentiles of one bound's samples (nearest rank).
func figures(name string, ms []float64, from map[string]int, slack time.Duration) BoundFigures {
	s := slices.Clone(ms)
	slices.Sort(s)
	rank := func(p float64) float64 { return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] }
	f := BoundFigures{Name: name, Samples: len(s), P50Ms: rank(0.5), P99Ms: rank(0.99), MaxMs: s[len(s)-1], MinMs: s[0],
		SlackMs: float64(slack) / float64(time.Millisecond), From: from, SamplesMs: s}
	f.ThreeP99Ms = 3 * f.P99Ms
	for _, v := range s {
		if v > f.SlackMs {
			f.Over++
		}
	}
	return f
}

func writeBounds(dir string, res *BoundsResult) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bounds.json"), data, 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Bounds the tests keep\n\n")
	fmt.Fprintf(&b, "Measured %s on %d cores (%s), load average %s at the start; %d runs in %.0f s, %d failed.\n\n",
		res.Started, res.Machine.Cores, res.Machine.CPU, res.Machine.LoadAvgStart, res.Count, res.Seconds, res.Failures)
	fmt.Fprintf(&b, "    %s\n\n", res.Command)
	fmt.Fprintf(&b, "(`make bench-bounds BOUNDS_COUNT=%d`.) Each slack is counted from the moment the design fixes: the loss of the Lease "+
		"(the Lease taken, or the last renewal the API server recorded plus the renew deadline) to the replica stopped; "+
		"the old leader's loss plus the lease duration to a standby's acquisition. "+
		"test/integration/framework/bounds.go holds the tests to 3 × p99.\n\n", res.Count)
	fmt.Fprintf(&b, "| bound | samples | min | p50 | p99 | max | 3 × p99 | held to now | samples over it |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range res.Bounds {
		fmt.Fprintf(&b, "| %s | %d | %.0f ms | %.0f ms | %.0f ms | %.0f ms | **%.0f ms** | %.0f ms | %d |\n",
			f.Name, f.Samples, f.MinMs, f.P50Ms, f.P99Ms, f.MaxMs, f.ThreeP99Ms, f.SlackMs, f.Over)
	}
	fmt.Fprintf(&b, "\nSamples per check:\n\n")
	for _, f := range res.Bounds {
		for _, what := range slices.Sorted(maps.Keys(f.From)) {
			fmt.Fprintf(&b, "- %s, %s: %d\n", f.Name, strings.ReplaceAll(what, "_", " "), f.From[what])
		}
	}
	path := filepath.Join(dir, "bounds.md")
	logf("bounds: wrote %s", path)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
