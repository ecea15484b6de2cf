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
	"fmt"
	"math"
	"os"
)

var selfPid = os.Getpid()

// Result is everything one bench run measured; it is written as JSON, every
// round's raw figures included.
type Result struct {
	Started    string  `json:"started"`
	Finished   string  `json:"finished"`
	Machine    Machine `json:"machine"`
	Cluster    string  `json:"cluster"`
	N          int     `json:"n"`
	C          int     `json:"c"`
	CeilingC   []int   `json:"ceilingConcurrencies"`
	RoundCount int     `json:"roundCount"`
	// Seed with the round number seeds each round's phase order.
	Seed          int64   `json:"seed"`
	CapacityP99Ms float64 `json:"capacityTargetP99Ms"`
	CapacityTries int     `json:"capacityTries"`
	// WarmUp tells whether an unmeasured load-generator round ran first.
	WarmUp bool     `json:"warmUp"`
	Rounds []*Round `json:"rounds"`
	Bars   []*Bar   `json:"bars"`
	Costs  []*Cost  `json:"costs"`
}

// Round is one pass over every selected phase, in its own order.
type Round struct {
	Index   int      `json:"round"`
	Order   []string `json:"order"`
	Phases  []*Phase `json:"phases"`
	Restart *Restart `json:"restart,omitempty"`
	// OtherRestarts are the restarts of the tuned twin over its own
	// backlog's Books and of ours with streaming lists off.
	OtherRestarts []*Restart `json:"otherRestarts,omitempty"`
	// LiveRestarts are the restart-live phases (restartlive.go), one per
	// configuration.
	LiveRestarts []*LiveRestart `json:"liveRestarts,omitempty"`
	// Ceiling is the best load-generator rate of the round, from
	// CeilingPhase.
	Ceiling      float64 `json:"ceilingBooksPerSecond"`
	CeilingPhase string  `json:"ceilingPhase"`
	// LiveCeiling is the best rate of the load generator that creates each
	// Book too (three writes per Book, as in a live phase), from
	// LiveCeilingPhase: the capacity search's denominator.
	LiveCeiling      float64     `json:"liveCeilingBooksPerSecond,omitempty"`
	LiveCeilingPhase string      `json:"liveCeilingPhase,omitempty"`
	Capacity         []*Capacity `json:"capacity,omitempty"`
	Seconds          float64     `json:"seconds"`
}

type Machine struct {
	Cores        int    `json:"cores"`
	CPU          string `json:"cpu"`
	MemoryBytes  uint64 `json:"memoryBytes"`
	GoVersion    string `json:"goVersion"`
	OS           string `json:"os"`
	LoadAvgStart string `json:"loadAvgStart"`
}

// Phase is one controller (or the load generator) converging N Books.
type Phase struct {
	Name        string   `json:"name"`
	Round       int      `json:"round"`
	Mode        string   `json:"mode"`   // live, backlog or ceiling
	Config      string   `json:"config"` // ours, ours-ui, twin-tuned, twin-same, twin-default or ceiling
	Controller  string   `json:"controller"`
	Workers     int      `json:"workers"`
	ClientLimit string   `json:"clientRateLimit"`
	Args        []string `json:"args,omitempty"`
	// UIUpdates counts the UI's Server-Sent Events read by the client
	// subscribed during an ours-ui phase.
	UIUpdates  int64    `json:"uiUpdates,omitempty"`
	Env        []string `json:"env,omitempty"`
	Namespace  string   `json:"namespace"`
	N          int      `json:"n"`
	C          int      `json:"c"`
	CreateRate float64  `json:"createRatePerSecond,omitempty"`

	LoadAvgStart          string  `json:"loadAvgStart"`
	OtherCoresBusyAtStart float64 `json:"otherCoresBusyAtStart"`
	WaitedForQuietSeconds float64 `json:"waitedForQuietSeconds"`

	StartupSeconds     float64 `json:"startupSeconds,omitempty"`
	CreateSeconds      float64 `json:"createSeconds"`
	CreateRateAchieved float64 `json:"createRateAchievedPerSecond,omitempty"` // Creates sent per second, first to last
	FirstReadySeconds  float64 `json:"firstReadySeconds"`
	ConvergeSeconds    float64 `json:"convergeSeconds"`
	BooksPerSecond     float64 `json:"booksPerSecond"`
	LatencyP50Ms       float64 `json:"latencyP50Ms,omitempty"`
	LatencyP99Ms       float64 `json:"latencyP99Ms,omitempty"`
	LatencyMaxMs       float64 `json:"latencyMaxMs,omitempty"`
	ConfigMaps         int     `json:"configMaps"`

	CPUSeconds          float64            `json:"cpuSeconds"`
	CPUSecondsDuringRun float64            `json:"cpuSecondsDuringRun"`
	IdleRSSBytes        uint64             `json:"idleRSSBytes,omitempty"` // live: RSS when ready, over an empty namespace
	PeakRSSBytes        uint64             `json:"peakRSSBytes"`
	EndRSSBytes         uint64             `json:"endRSSBytes"`
	EndRSSFileBytes     uint64             `json:"endRSSFileBytes,omitempty"` // of EndRSSBytes, backed by files (the binary)
	PeakHeapInuseBytes  uint64             `json:"peakHeapInuseBytes"`
	EndHeapInuseBytes   uint64             `json:"endHeapInuseBytes"`
	EndHeapAllocBytes   uint64             `json:"endHeapAllocBytes"`
	Requests            map[string]float64 `json:"requestsByVerb"`
	Writes              float64            `json:"writes"`
	Retries             float64            `json:"workqueueRetries"`
	OtherCPUSeconds     map[string]float64 `json:"otherCPUSeconds"`

	NamespaceDeleteSeconds float64 `json:"namespaceDeleteSeconds"`

	Series [][2]float64 `json:"readyOverTime"` // [seconds, Books Ready]
}

// Restart is book-controller restarted over converged Books.
type Restart struct {
	Round     int    `json:"round"`
	N         int    `json:"n"`
	Namespace string `json:"namespace"`
	// After names the phase whose converged Books it restarts over.
	After string `json:"after"`
	// Controller is the configuration restarted; WatchListOff, whether
	// client-go's streaming lists were turned off for it.
	Controller            string             `json:"controller,omitempty"`
	WatchListOff          bool               `json:"watchListOff,omitempty"`
	OtherCoresBusyAtStart float64            `json:"otherCoresBusyAtStart"`
	SyncedSeconds         float64            `json:"syncedSeconds"`
	IdleSeconds           float64            `json:"idleSeconds"`
	QuietWindowSeconds    float64            `json:"quietWindowSeconds"`
	Reconciles            float64            `json:"reconciles"`
	Requests              map[string]float64 `json:"requestsByVerb"`
	Writes                float64            `json:"writes"`
	CPUSeconds            float64            `json:"cpuSeconds"`
	PeakRSSBytes          uint64             `json:"peakRSSBytes"`
	// The API server's RSS just before the controller started, and its
	// peak until the controller was idle (0 with -kubeconfig).
	APIServerRSSBeforeBytes uint64 `json:"apiServerRSSBeforeBytes,omitempty"`
	APIServerPeakRSSBytes   uint64 `json:"apiServerPeakRSSBytes,omitempty"`
	// APIServerCPUSeconds is the API server's CPU from the start to idle.
	APIServerCPUSeconds float64 `json:"apiServerCPUSeconds,omitempty"`
	// APIServerGC is whether the API server collected its garbage just
	// before the start (settle).
	APIServerGC bool `json:"apiServerGC,omitempty"`
	// Floor is the API server's own time to stream the same lists to a
	// client that only reads them, measured just before (-restart-floor).
	Floor *Floor `json:"floor,omitempty"`
}

func (p *Phase) summary() string {
	s := fmt.Sprintf("%d Books Ready in %.2fs (%.0f/s), CPU %.2fs, peak RSS %s, peak heap %s, writes %.0f",
		p.N, p.ConvergeSeconds, p.BooksPerSecond, p.CPUSeconds, mib(p.PeakRSSBytes), mib(p.PeakHeapInuseBytes), p.Writes)
	if p.LatencyP99Ms > 0 {
		s += fmt.Sprintf(", create→Ready p50 %.0fms p99 %.0fms", p.LatencyP50Ms, p.LatencyP99Ms)
	}
	return s
}

// LiveRestart is a configuration restarted over N Books it converged while
// a paced writer creates new Books and edits old ones (restartlive.go).
// Latencies count from the write or from the moment the caches were synced,
// whichever is later; the Raw ones from the write alone, which includes
// the wait for the restarted process to list.
type LiveRestart struct {
	Round      int    `json:"round"`
	Config     string `json:"config"`
	Controller string `json:"controller"`
	Namespace  string `json:"namespace"`
	N          int    `json:"n"`
	// Run is the restart's place in its unit (0: first), whose
	// configurations share the converged Books; Converged is how many
	// Books were there (N, and the new Books of earlier runs).
	Run       int `json:"run,omitempty"`
	Converged int `json:"converged"`
	NewBooks  int `json:"newBooks"`
	Edits     int `json:"edits"`
	// Failover: a warm standby took over from a SIGKILLed leader
	// (failoverlive.go) rather than one process restarting.
	Failover bool `json:"failover,omitempty"`
	// SyncedSeconds and IdleSeconds count from the process start: /readyz
	// 200, and the start of the 2 s with an empty queue and no request. In
	// a failover, from the kill: the Lease taken by the standby, and idle.
	SyncedSeconds  float64 `json:"syncedSeconds"`
	IdleSeconds    float64 `json:"idleSeconds"`
	CreateP50Ms    float64 `json:"createP50Ms"`
	CreateP99Ms    float64 `json:"createP99Ms"`
	CreateRawP50Ms float64 `json:"createRawP50Ms"`
	CreateRawP99Ms float64 `json:"createRawP99Ms"`
	EditP50Ms      float64 `json:"editP50Ms"`
	EditP99Ms      float64 `json:"editP99Ms"`
	EditRawP50Ms   float64 `json:"editRawP50Ms"`
	EditRawP99Ms   float64 `json:"editRawP99Ms"`
	// UntouchedWritten counts the converged Books and ConfigMaps the live
	// writer left alone whose resourceVersion changed: writes on restart.
	UntouchedWritten int `json:"untouchedWritten"`
	// OtherCoresBusyAtStart is what the machine's other work kept busy
	// once waitQuiet let the restart (the kill) go ahead.
	OtherCoresBusyAtStart float64 `json:"otherCoresBusyAtStart,omitempty"`
	// APIServerGC is whether the API server collected its garbage just
	// before the restart (the kill).
	APIServerGC bool `json:"apiServerGC,omitempty"`
}

// syncedWord names the moment a restart-live run's latencies count from.
func syncedWord(failover bool) string {
	if failover {
		return "Lease taken"
	}
	return "synced"
}

func (x *LiveRestart) summary() string {
	synced := syncedWord(x.Failover)
	return fmt.Sprintf("%s over %d Books: %s after %.2fs, idle after %.2fs; create→Ready p50 %.0fms p99 %.0fms (from the write: %.0f/%.0f); edit→ConfigMap p50 %.0fms p99 %.0fms (from the write: %.0f/%.0f); %d untouched objects written",
		x.Config, x.N, synced, x.SyncedSeconds, x.IdleSeconds, x.CreateP50Ms, x.CreateP99Ms, x.CreateRawP50Ms, x.CreateRawP99Ms,
		x.EditP50Ms, x.EditP99Ms, x.EditRawP50Ms, x.EditRawP99Ms, x.UntouchedWritten)
}

func (r *Restart) summary() string {
	s := fmt.Sprintf("%s: synced after %.2fs, idle after %.2fs, %.0f writes, %.0f requests, peak RSS %s, API server %s → %s, API server CPU %.2fs",
		r.Controller, r.SyncedSeconds, r.IdleSeconds, r.Writes, sumMap(r.Requests), mib(r.PeakRSSBytes), mib(r.APIServerRSSBeforeBytes), mib(r.APIServerPeakRSSBytes), r.APIServerCPUSeconds)
	if r.Floor != nil {
		s += fmt.Sprintf("; floor %.2fs (Books %.2fs, ConfigMaps %.2fs, API server CPU %.2fs)", r.Floor.Seconds, r.Floor.BooksSeconds, r.Floor.ConfigMapSeconds, r.Floor.APIServerCPUSeconds)
	}
	return s
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func mib(b uint64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func sumMap(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// phase returns the round's phase of that name, or nil.
func (r *Round) phase(name string) *Phase {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// capacityOf returns the round's capacity search of config, or nil.
func (r *Round) capacityOf(config string) *Capacity {
	for _, c := range r.Capacity {
		if c.Config == config {
			return c
		}
	}
	return nil
}
