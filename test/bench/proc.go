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
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"ydzs.io/book-controller/test/integration/framework"
)

// proc is a running controller process and what is sampled from it.
type proc struct {
	*framework.Process
	pid         int
	start       time.Time
	metricsAddr string
	probeAddr   string
	pprofAddr   string // "" unless it serves Go profiles (-profile)
	logPath     string
	args        []string
	env         []string

	mu       sync.Mutex
	peakHeap float64
	stop     chan struct{}
	sampled  sync.WaitGroup
	// uiUpdates counts the Server-Sent Events the UI client read; written
	// by subscribeUI's goroutine, read by collect after the process ended.
	uiUpdates atomic.Int64
}

func (e *env) startController(s controllerSpec, ns, logName string) (*proc, error) {
	addrs, err := framework.FreeAddrs(4)
	if err != nil {
		return nil, err
	}
	m, pr := addrs[0], addrs[1]
	args := s.args(ns, m, pr)
	if s.ui {
		args = append(args, "--ui-bind-address", addrs[2])
	}
	pprofAddr := ""
	if e.o.profileDir != "" && s.pprof {
		pprofAddr = addrs[3]
		args = append(args, "--pprof-bind-address", pprofAddr)
	}
	log, err := os.Create(filepath.Join(e.work, logName+".log"))
	if err != nil {
		return nil, err
	}
	// Each configuration's GOGC is its own: book-controller's built-in
	// default, Go's for the scaffold twins, ours for the tuned twin.
	env := append(slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "GOGC=") }), s.env...)
	p := &proc{metricsAddr: m, probeAddr: pr, pprofAddr: pprofAddr, logPath: log.Name(), args: args, env: s.env, stop: make(chan struct{})}
	p.start = time.Now()
	p.Process, err = framework.Start(logName, s.bin, args, framework.ProcessOptions{Env: env, Output: log})
	if err != nil {
		log.Close()
		return nil, err
	}
	p.pid = p.Pid()
	go func() { <-p.Exited(); log.Close() }()
	p.sampled.Add(1)
	go p.sample()
	if s.ui {
		go p.subscribeUI(addrs[2])
	}
	return p, nil
}

// subscribeUI is a page left open on the UI: it reads the event stream
// (an update every half second) until the process exits, reconnecting
// while the UI is not yet up.
func (p *proc) subscribeUI(addr string) {
	for !p.exited() {
		resp, err := http.Get("http://" + addr + "/api/events")
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break
			}
			if strings.HasPrefix(line, "data: ") {
				p.uiUpdates.Add(1)
			}
		}
		resp.Body.Close()
	}
}

// sample scrapes the heap every 250ms to catch its peak.
func (p *proc) sample() {
	defer p.sampled.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.Exited():
			return
		case <-t.C:
			if m, err := scrape(p.metricsAddr); err == nil {
				p.mu.Lock()
				p.peakHeap = max(p.peakHeap, m.value("go_memstats_heap_inuse_bytes"))
				p.mu.Unlock()
			}
		}
	}
}

func (p *proc) exited() bool { return !p.Running() }

// terminate sends SIGTERM and waits for the exit, SIGKILL after 30s.
func (p *proc) terminate() {
	close(p.stop)
	p.sampled.Wait()
	_ = p.Signal(syscall.SIGTERM)
	if _, err := p.Wait(30 * time.Second); err != nil {
		_ = p.Kill()
	}
}

// ready reports whether the controller's /readyz answers 200.
func (p *proc) ready() bool {
	code, _, err := framework.HTTPGet(p.probeAddr, "/readyz")
	return err == nil && code == http.StatusOK
}

// procStats are the process's own figures from /proc.
type procStats struct {
	CPUSeconds float64
	HWMBytes   uint64
	RSSBytes   uint64
	// RSSFileBytes is the part of RSSBytes backed by files: the binary's
	// own pages, the same for any number of Books.
	RSSFileBytes uint64
}

const clockTicks = 100 // USER_HZ on Linux

func readProc(pid int) (procStats, error) {
	var s procStats
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return s, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	s.CPUSeconds = float64(ut+st) / clockTicks
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		var kb uint64
		if _, err := fmt.Sscanf(l, "VmHWM: %d kB", &kb); err == nil {
			s.HWMBytes = kb * 1024
		}
		if _, err := fmt.Sscanf(l, "VmRSS: %d kB", &kb); err == nil {
			s.RSSBytes = kb * 1024
		}
		if _, err := fmt.Sscanf(l, "RssFile: %d kB", &kb); err == nil {
			s.RSSFileBytes = kb * 1024
		}
	}
	return s, nil
}

// scrape fetches and parses a controller's /metrics.
func scrape(addr string) (metrics, error) {
	f, err := framework.ScrapeMetrics(addr)
	return metrics(f), err
}

// metrics are the metric families of one scrape.
type metrics map[string]*dto.MetricFamily

// value sums every sample of name (0 when the metric is not exported).
func (m metrics) value(name string) float64 {
	v, _ := framework.MetricValue(m, name)
	return v
}

// requests returns rest_client_requests_total by method.
func (m metrics) requests() map[string]float64 {
	return framework.MetricSumBy(m, "rest_client_requests_total", "method")
}

func writes(req map[string]float64) float64 {
	return req["POST"] + req["PUT"] + req["PATCH"] + req["DELETE"]
}
