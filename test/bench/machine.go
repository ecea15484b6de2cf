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
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func machine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	m.LoadAvgStart = loadavg()
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb uint64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		m.MemoryBytes = kb * 1024
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				m.CPU = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return m
}

// cpuBusy is how many cores the machine kept busy over d (from /proc/stat).
func cpuBusy(d time.Duration) float64 {
	read := func() (busy, total float64) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0
		}
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		for i, x := range f[1:] {
			v, _ := strconv.ParseFloat(x, 64)
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		return busy, total
	}
	b0, t0 := read()
	time.Sleep(d)
	b1, t1 := read()
	if t1 == t0 {
		return 0
	}
	return (b1 - b0) / (t1 - t0) * float64(numCPU())
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func load1() float64 {
	v, _ := strconv.ParseFloat(strings.Fields(loadavg() + " 0")[0], 64)
	return v
}

func waitLoad(ctx context.Context, limit float64) {
	deadline := time.Now().Add(5 * time.Minute)
	for load1() > limit && time.Now().Before(deadline) && ctx.Err() == nil {
		logf("load average %s above %.1f: waiting for other work to finish", loadavg(), limit)
		time.Sleep(15 * time.Second)
	}
}

// waitQuiet waits until the rest of the machine (the idle control plane
// included) keeps fewer than limit cores busy, and returns what it saw.
func waitQuiet(ctx context.Context, limit float64) (busy float64, waited time.Duration) {
	start := time.Now()
	for {
		busy = cpuBusy(2 * time.Second)
		if busy < limit || time.Since(start) > 2*time.Minute || ctx.Err() != nil {
			return busy, time.Since(start)
		}
		logf("machine busy (%.2f cores used by other work, load %s): waiting", busy, loadavg())
		time.Sleep(3 * time.Second)
	}
}
