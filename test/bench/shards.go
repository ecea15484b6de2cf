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
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/shard"
)

// The shard comparison (-shards K, `make bench-shards`): N Books over
// -shard-namespaces namespaces, first converged by one unsharded replica,
// then by K replicas with --shards K, each phase a backlog (the Books are
// created first, then the replicas start) in namespaces of its own. It
// reports each replica's peak RSS, CPU and the Books of its shard, the
// total Books per second, and how many Books each shard holds.

// leaseID is the replicas' --leader-elect-id: their shards' Leases are
// leaseID-shard-<i> (shard.LeaseName).
const leaseID = "book-controller"

// ShardResult is what a shard comparison measured; written as JSON.
type ShardResult struct {
	Started    string        `json:"started"`
	Machine    Machine       `json:"machine"`
	Cluster    string        `json:"cluster"`
	N          int           `json:"n"`
	Namespaces int           `json:"namespaces"`
	Shards     int           `json:"shards"`
	OurArgs    string        `json:"ourArgs,omitempty"`
	Rounds     []*ShardRound `json:"rounds"`
}

// ShardRound is one unsharded phase and one sharded, with the default
// flags besides --shards (Books placed by the hash of their UID).
type ShardRound struct {
	Index  int           `json:"round"`
	Phases []*ShardPhase `json:"phases"`
}

// ShardPhase is one set of replicas converging N Books.
type ShardPhase struct {
	Name   string `json:"name"`
	Shards int    `json:"shards"`
	// BooksPerShard counts the phase's Books by the shard their UIDs
	// hash into.
	BooksPerShard []int   `json:"booksPerShard"`
	LoadAvgStart  string  `json:"loadAvgStart"`
	CreateSeconds float64 `json:"createSeconds"`
	// Seconds from the replicas' start until every Book was Ready.
	ConvergeSeconds float64            `json:"convergeSeconds"`
	BooksPerSecond  float64            `json:"booksPerSecond"`
	Replicas        []*ShardReplica    `json:"replicas"`
	ControlPlaneCPU map[string]float64 `json:"controlPlaneCPUSeconds"`
	LoadAvgEnd      string             `json:"loadAvgEnd"`
}

// ShardReplica is one replica's figures.
type ShardReplica struct {
	Name       string  `json:"name"`
	Shards     []int   `json:"shards"` // the shards it held at the end (empty: unsharded)
	Books      int     `json:"books"`  // the Books of those shards (all, unsharded)
	PeakRSS    uint64  `json:"peakRSSBytes"`
	CPUSeconds float64 `json:"cpuSeconds"`
}

// shardNamespaces names the namespaces, the same in every phase (each
// phase deletes them when it ends), in a shape users have (team-like names
// with a number), which a hash of the namespace put all in one shard: the
// per-shard table shows that the UIDs' hash spreads their Books.
func shardNamespaces(count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("team-%02d", i)
	}
	return out
}

func (e *env) runShards(ctx context.Context) error {
	o := e.o
	res := &ShardResult{Started: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Cluster: e.res.Cluster,
		N: o.n, Namespaces: o.shardNamespaces, Shards: o.shards, OurArgs: o.ourArgs}
	variants := []struct {
		name string
		k    int
	}{
		{"unsharded", 1},
		{fmt.Sprintf("%d-shards", o.shards), o.shards},
	}
	for r := 1; r <= o.rounds; r++ {
		e.round = r
		round := &ShardRound{Index: r}
		res.Rounds = append(res.Rounds, round)
		// Rotate the order, so that no phase always meets the API server
		// fresher.
		for j := range variants {
			v := variants[(j+r-1)%len(variants)]
			p, err := e.shardPhase(ctx, r, v.name, v.k)
			round.Phases = append(round.Phases, p)
			if err != nil {
				_ = writeShards(o, res)
				return fmt.Errorf("round %d: %w", r, err)
			}
			logf("round %d, %s: %.0f Books/s, Books per shard %v; %s", r, p.Name, p.BooksPerSecond, p.BooksPerShard, p.replicaSummary())
		}
	}
	return writeShards(o, res)
}

func (p *ShardPhase) replicaSummary() string {
	var parts []string
	for _, r := range p.Replicas {
		parts = append(parts, fmt.Sprintf("%s %v: %d Books, peak RSS %s, %.1f s CPU", r.Name, r.Shards, r.Books, mib(r.PeakRSS), r.CPUSeconds))
	}
	return strings.Join(parts, "; ")
}

// shardPhase creates N Books over the namespaces, starts k replicas (k = 1:
// unsharded, with leader election as a Deployment runs it) and waits until
// every Book is Ready; then it reads each replica's /proc and stops them,
// and deletes the namespaces.
func (e *env) shardPhase(ctx context.Context, round int, name string, k int) (*ShardPhase, error) {
	o := e.o
	p := &ShardPhase{Name: name, Shards: k}
	waitLoad(ctx, o.maxLoad)
	p.LoadAvgStart = loadavg()
	namespaces := shardNamespaces(o.shardNamespaces)
	leaseNS := fmt.Sprintf("shards-r%d-%s-leases", round, name)
	for _, ns := range append([]string{leaseNS}, namespaces...) {
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return p, err
		}
	}
	defer func() {
		if err := e.deleteNamespaces(ctx, append(namespaces, leaseNS)); err != nil {
			logf("%v", err)
		}
	}()

	// N Books, spread evenly over the namespaces, created first.
	t := time.Now()
	per := o.n / len(namespaces)
	var wg sync.WaitGroup
	errs := make([]error, len(namespaces))
	sem := make(chan struct{}, 4) // 4 namespaces at a time, preCreateConcy creators each
	for i, ns := range namespaces {
		n := per
		if i < o.n%len(namespaces) {
			n++
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, errs[i] = e.createBooks(ctx, ns, n, max(o.preCreateConcy/4, 1), 0)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return p, err
		}
	}
	p.CreateSeconds = round3(time.Since(t).Seconds())
	watches := make([]*readyWatch, len(namespaces))
	for i, ns := range namespaces {
		n := per
		if i < o.n%len(namespaces) {
			n++
		}
		w, err := e.watchReady(ctx, ns, n)
		if err != nil {
			return p, err
		}
		defer w.stop()
		watches[i] = w
	}

	waitQuiet(ctx, o.maxBusy)
	cpu0 := e.cpCPU()
	start := time.Now()
	var procs []*proc
	defer func() {
		for _, pr := range procs {
			if !pr.exited() {
				pr.terminate()
			}
		}
	}()
	for r := range k {
		spec := controllerSpec{Config: name, Name: fmt.Sprintf("%s-%d", name, r), bin: e.ours,
			args: func(_, metrics, probe string) []string {
				a := []string{"--kubeconfig", e.kubecfg, "--leader-elect", "--leader-elect-namespace", leaseNS, "--leader-elect-id", leaseID,
					"--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
					"--workers", fmt.Sprint(e.defaults.workers), "--kube-api-qps", e.defaults.qps, "--kube-api-burst", e.defaults.burst}
				if k > 1 {
					a = append(a, "--shards", fmt.Sprint(k))
				}
				return append(a, strings.Fields(o.ourArgs)...)
			}}
		pr, err := e.startController(spec, "", fmt.Sprintf("r%d-%s-%d", round, name, r))
		if err != nil {
			return p, err
		}
		procs = append(procs, pr)
	}
	deadline := start.Add(o.timeout)
	for _, w := range watches {
		if err := w.wait(ctx, time.Until(deadline)); err != nil {
			return p, fmt.Errorf("%s: %w", name, err)
		}
	}
	p.ConvergeSeconds = round3(time.Since(start).Seconds())
	p.BooksPerSecond = round3(float64(o.n) / p.ConvergeSeconds)
	cpu1 := e.cpCPU()
	p.ControlPlaneCPU = map[string]float64{}
	for c, v := range cpu1 {
		p.ControlPlaneCPU[c] = round3(v - cpu0[c])
	}
	p.LoadAvgEnd = loadavg()

	// Which replica holds which shard, and so how many Books each served.
	booksOf, err := e.booksPerShard(ctx, namespaces, max(k, 1))
	if err != nil {
		return p, err
	}
	p.BooksPerShard = booksOf
	holders := map[string][]int{}
	if k > 1 {
		for i := range k {
			lease, err := e.kube.CoordinationV1().Leases(leaseNS).Get(ctx, shard.LeaseName(leaseID, i), metav1.GetOptions{})
			if err == nil && lease.Spec.HolderIdentity != nil {
				holders[*lease.Spec.HolderIdentity] = append(holders[*lease.Spec.HolderIdentity], i)
			}
		}
	}
	for r, pr := range procs {
		st, err := readProc(pr.pid)
		if err != nil {
			return p, err
		}
		rep := &ShardReplica{Name: fmt.Sprintf("%s-%d", name, r), PeakRSS: st.HWMBytes, CPUSeconds: round3(st.CPUSeconds)}
		if k == 1 {
			rep.Books = o.n
		} else {
			id := identityOf(pr)
			rep.Shards = holders[id]
			sort.Ints(rep.Shards)
			for _, s := range rep.Shards {
				rep.Books += booksOf[s]
			}
		}
		p.Replicas = append(p.Replicas, rep)
	}
	return p, nil
}

// booksPerShard counts the Books of the namespaces by the shard, of k,
// their UIDs hash into.
func (e *env) booksPerShard(ctx context.Context, namespaces []string, k int) ([]int, error) {
	out := make([]int, k)
	for _, ns := range namespaces {
		list, err := e.books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the Books of %s: %w", ns, err)
		}
		for _, b := range list.Items {
			out[shard.Of(b.UID, k)]++
		}
	}
	return out, nil
}

// identityOf reads the replica's identity from its log's start line.
func identityOf(pr *proc) string {
	b, err := os.ReadFile(pr.logPath)
	if err != nil {
		return ""
	}
	const key = `identity="`
	s := string(b)
	i := strings.Index(s, "Starting Book controller")
	if i < 0 {
		return ""
	}
	s = s[i:]
	j := strings.Index(s, key)
	if j < 0 {
		return ""
	}
	s = s[j+len(key):]
	return s[:strings.IndexByte(s, '"')]
}

// deleteNamespaces deletes the namespaces and waits until they are gone.
func (e *env) deleteNamespaces(ctx context.Context, namespaces []string) error {
	for _, ns := range namespaces {
		if err := e.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	timeout := 5*time.Minute + time.Duration(e.o.n/50)*time.Second
	return poll.Until(ctx, "the phase's namespaces to be deleted", 200*time.Millisecond, timeout, func(ctx context.Context) error {
		for _, ns := range namespaces {
			if _, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (%v)", ns, err)
			}
		}
		return nil
	})
}

func round3(v float64) float64 { return round(v, 3) }

// writeShards writes shards-<label>.json and .md.
func writeShards(o options, r *ShardResult) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(o.out, "shards-"+o.label)
	if err := writeJSON(base+".json", r); err != nil {
		return err
	}
	if err := os.WriteFile(base+".md", []byte(shardsMarkdown(r)), 0o644); err != nil {
		return err
	}
	logf("wrote %s.md and %s.json", base, base)
	return nil
}

func shardsMarkdown(r *ShardResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# book-controller: %d shards vs one replica\n\n", r.Shards)
	fmt.Fprintf(&b, "N = %d Books over %d namespaces (team-00 … team-%02d, N/%d each); %d round(s); %s; %d cores (%s), load average at start %s.\n\n",
		r.N, r.Namespaces, r.Namespaces-1, r.Namespaces, len(r.Rounds), r.Cluster, r.Machine.Cores, r.Machine.CPU, r.Machine.LoadAvgStart)
	if r.OurArgs != "" {
		fmt.Fprintf(&b, "Every replica also ran with `%s`.\n\n", r.OurArgs)
	}
	b.WriteString("Each phase is a backlog: the Books are created first, then the replicas start (with --leader-elect; sharded ones with --shards and no other flag, their Books placed by the hash of their UIDs); ")
	b.WriteString("Books/s is N over the time from their start until every Book is Ready. Peak RSS is each process's VmHWM; CPU is its user+system time over the phase. ")
	b.WriteString("The API server, etcd, the replicas and the bench share the machine (and, where the load average says so, other work), so the API server bounds every throughput here.\n\n")
	b.WriteString("| round | phase | load avg (start → end) | Books/s | replica | shards | Books | peak RSS | CPU s | CPU ms per Book |\n|---|---|---|---:|---|---|---:|---:|---:|---:|\n")
	for _, rd := range r.Rounds {
		for _, p := range rd.Phases {
			for _, rep := range p.Replicas {
				perBook := "–"
				if rep.Books > 0 {
					perBook = fmt.Sprintf("%.3f", rep.CPUSeconds*1000/float64(rep.Books))
				}
				shards := "all"
				if p.Shards > 1 {
					shards = fmt.Sprint(rep.Shards)
				}
				fmt.Fprintf(&b, "| %d | %s | %s → %s | %.0f | %s | %s | %d | %s | %.1f | %s |\n", rd.Index, p.Name, p.LoadAvgStart, p.LoadAvgEnd,
					p.BooksPerSecond, rep.Name, shards, rep.Books, mib(rep.PeakRSS), rep.CPUSeconds, perBook)
			}
		}
	}
	b.WriteString("\n## Ratios against the unsharded replica of the same round\n\n")
	b.WriteString("| round | phase | max peak RSS of a replica / unsharded peak RSS | total Books/s / unsharded Books/s |\n|---|---|---:|---:|\n")
	for _, rd := range r.Rounds {
		var base *ShardPhase
		for _, p := range rd.Phases {
			if p.Shards == 1 && len(p.Replicas) > 0 {
				base = p
			}
		}
		if base == nil {
			continue
		}
		for _, p := range rd.Phases {
			if p.Shards == 1 || len(p.Replicas) == 0 || p.BooksPerSecond == 0 {
				continue
			}
			var maxRSS uint64
			for _, rep := range p.Replicas {
				maxRSS = max(maxRSS, rep.PeakRSS)
			}
			fmt.Fprintf(&b, "| %d | %s | %.2f | %.2f |\n", rd.Index, p.Name, float64(maxRSS)/float64(base.Replicas[0].PeakRSS),
				p.BooksPerSecond/base.BooksPerSecond)
		}
	}
	b.WriteString("\n## Books per shard (by the hash of their UIDs)\n\n| round | phase | Books per shard | largest / mean |\n|---|---|---|---:|\n")
	for _, rd := range r.Rounds {
		for _, p := range rd.Phases {
			if p.Shards > 1 && len(p.BooksPerShard) > 0 {
				total, largest := 0, 0
				for _, n := range p.BooksPerShard {
					total, largest = total+n, max(largest, n)
				}
				fmt.Fprintf(&b, "| %d | %s | %v | %.3f |\n", rd.Index, p.Name, p.BooksPerShard, float64(largest)*float64(len(p.BooksPerShard))/float64(max(total, 1)))
			}
		}
	}
	return b.String()
}
