package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// controllerSpec says how to start one of the controllers in a namespace.
type controllerSpec struct {
	Name        string // "book-controller" or "controller-runtime twin"
	Workers     int
	ClientLimit string // the client-side rate limit it runs with
	args        func(ns, metrics, probe string) []string
	bin         string
}

func (e *env) ourController() controllerSpec {
	limit := fmt.Sprintf("%s QPS / %s burst (client-go token bucket)", e.ourQPS, e.ourBurst)
	if strings.HasPrefix(e.ourQPS, "-") {
		limit = "none (--kube-api-qps -1)"
	}
	return controllerSpec{
		Name: "book-controller", Workers: e.ourWork, ClientLimit: limit, bin: e.ours,
		args: func(ns, metrics, probe string) []string {
			a := []string{"--kubeconfig", e.kubecfg, "--namespace", ns,
				"--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
				"--workers", strconv.Itoa(e.ourWork), "--kube-api-qps", e.ourQPS, "--kube-api-burst", e.ourBurst}
			return append(a, strings.Fields(e.o.ourArgs)...)
		},
	}
}

// twinController is the controller-runtime twin; workers 0 leaves
// --max-concurrent-reconciles at its default (1).
func (e *env) twinController(workers int) controllerSpec {
	s := controllerSpec{
		Name: "controller-runtime twin", Workers: workers, bin: e.twin,
		// ctrl.GetConfig (controller-runtime v0.25 pkg/client/config) sets
		// QPS = -1 when the kubeconfig leaves it 0: no client-side limit.
		ClientLimit: "none (ctrl.GetConfig sets QPS -1)",
		args: func(ns, metrics, probe string) []string {
			a := []string{"--kubeconfig", e.kubecfg, "--namespace", ns,
				"--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probe}
			if workers > 0 {
				a = append(a, "--max-concurrent-reconciles", strconv.Itoa(workers))
			}
			if e.o.twinLogInfo {
				a = append(a, "--zap-log-level=info")
			}
			return a
		},
	}
	if workers == 0 {
		s.Workers = 1
	}
	return s
}

// proc is a running controller process and what is sampled from it.
type proc struct {
	cmd        *exec.Cmd
	pid        int
	start      time.Time
	metricsURL string
	probeURL   string
	args       []string
	done       chan struct{}

	mu       sync.Mutex
	peakHeap float64
	stop     chan struct{}
	sampled  sync.WaitGroup
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func (e *env) startController(s controllerSpec, ns, logName string) (*proc, error) {
	m, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := s.args(ns, m, pr)
	log, err := os.Create(filepath.Join(e.work, logName+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = os.Environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{cmd: cmd, metricsURL: "http://" + m + "/metrics", probeURL: "http://" + pr + "/readyz",
		args: args, done: make(chan struct{}), stop: make(chan struct{})}
	p.start = time.Now()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait(); log.Close(); close(p.done) }()
	p.sampled.Add(1)
	go p.sample()
	return p, nil
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
		case <-p.done:
			return
		case <-t.C:
			if m, err := scrape(p.metricsURL); err == nil {
				p.mu.Lock()
				p.peakHeap = max(p.peakHeap, m.sum("go_memstats_heap_inuse_bytes", nil))
				p.mu.Unlock()
			}
		}
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate sends SIGTERM and waits for the exit, SIGKILL after 30s.
func (p *proc) terminate() {
	close(p.stop)
	p.sampled.Wait()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) ready(ctx context.Context) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.probeURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// procStats are the process's own figures from /proc.
type procStats struct {
	CPUSeconds float64
	HWMBytes   uint64
	RSSBytes   uint64
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
	}
	return s, nil
}

// metrics is a parsed Prometheus text exposition: samples by name.
type metrics map[string][]sample

type sample struct {
	labels map[string]string
	value  float64
}

func scrape(url string) (metrics, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			name, rest = line[:i], line[j+1:]
			for _, kv := range splitLabels(line[i+1 : j]) {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = strings.Trim(v, `"`)
			}
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m[name] = append(m[name], sample{labels, v})
	}
	return m, sc.Err()
}

func splitLabels(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// sum adds the samples of name whose labels include match.
func (m metrics) sum(name string, match map[string]string) float64 {
	var t float64
	for _, s := range m[name] {
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			t += s.value
		}
	}
	return t
}

// requests returns rest_client_requests_total by method.
func (m metrics) requests() map[string]float64 {
	out := map[string]float64{}
	for _, s := range m["rest_client_requests_total"] {
		out[s.labels["method"]] += s.value
	}
	return out
}

func writes(req map[string]float64) float64 {
	return req["POST"] + req["PUT"] + req["PATCH"] + req["DELETE"]
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
