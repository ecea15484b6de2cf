package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

var selfPid = os.Getpid()

// Result is everything one bench run measured; it is written as JSON.
type Result struct {
	Started  string  `json:"started"`
	Finished string  `json:"finished"`
	Machine  Machine `json:"machine"`
	Cluster  string  `json:"cluster"`
	N        int     `json:"n"`
	C        int     `json:"c"`
	// WarmUp tells whether an unmeasured load-generator round ran first.
	WarmUp  bool     `json:"warmUp"`
	Phases  []*Phase `json:"phases"`
	Restart *Restart `json:"restart,omitempty"`
	Ratios  []Ratio  `json:"ratios"`
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
	Mode        string   `json:"mode"` // live, backlog or ceiling
	Controller  string   `json:"controller"`
	Workers     int      `json:"workers"`
	ClientLimit string   `json:"clientRateLimit"`
	Args        []string `json:"args,omitempty"`
	Namespace   string   `json:"namespace"`
	N           int      `json:"n"`
	C           int      `json:"c"`
	CreateRate  float64  `json:"createRatePerSecond,omitempty"`

	LoadAvgStart          string  `json:"loadAvgStart"`
	OtherCoresBusyAtStart float64 `json:"otherCoresBusyAtStart"`
	WaitedForQuietSeconds float64 `json:"waitedForQuietSeconds"`

	StartupSeconds    float64 `json:"startupSeconds,omitempty"`
	CreateSeconds     float64 `json:"createSeconds"`
	FirstReadySeconds float64 `json:"firstReadySeconds"`
	ConvergeSeconds   float64 `json:"convergeSeconds"`
	BooksPerSecond    float64 `json:"booksPerSecond"`
	LatencyP50Ms      float64 `json:"latencyP50Ms,omitempty"`
	LatencyP99Ms      float64 `json:"latencyP99Ms,omitempty"`
	LatencyMaxMs      float64 `json:"latencyMaxMs,omitempty"`
	ConfigMaps        int     `json:"configMaps"`

	CPUSeconds          float64            `json:"cpuSeconds"`
	CPUSecondsDuringRun float64            `json:"cpuSecondsDuringRun"`
	PeakRSSBytes        uint64             `json:"peakRSSBytes"`
	EndRSSBytes         uint64             `json:"endRSSBytes"`
	PeakHeapInuseBytes  uint64             `json:"peakHeapInuseBytes"`
	EndHeapInuseBytes   uint64             `json:"endHeapInuseBytes"`
	EndHeapAllocBytes   uint64             `json:"endHeapAllocBytes"`
	Requests            map[string]float64 `json:"requestsByVerb"`
	Writes              float64            `json:"writes"`
	Retries             float64            `json:"workqueueRetries"`
	OtherCPUSeconds     map[string]float64 `json:"otherCPUSeconds"`

	Series [][2]float64 `json:"readyOverTime"` // [seconds, Books Ready]
}

// Restart is book-controller restarted over converged Books.
type Restart struct {
	N                     int                `json:"n"`
	Namespace             string             `json:"namespace"`
	OtherCoresBusyAtStart float64            `json:"otherCoresBusyAtStart"`
	SyncedSeconds         float64            `json:"syncedSeconds"`
	IdleSeconds           float64            `json:"idleSeconds"`
	QuietWindowSeconds    float64            `json:"quietWindowSeconds"`
	Reconciles            float64            `json:"reconciles"`
	Requests              map[string]float64 `json:"requestsByVerb"`
	Writes                float64            `json:"writes"`
	CPUSeconds            float64            `json:"cpuSeconds"`
	PeakRSSBytes          uint64             `json:"peakRSSBytes"`
}

type Ratio struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Bar   string  `json:"bar"`
	Met   *bool   `json:"met,omitempty"`
}

func (p *Phase) summary() string {
	s := fmt.Sprintf("%d Books Ready in %.2fs (%.0f/s), CPU %.2fs, peak RSS %s, peak heap %s, writes %.0f",
		p.N, p.ConvergeSeconds, p.BooksPerSecond, p.CPUSeconds, mib(p.PeakRSSBytes), mib(p.PeakHeapInuseBytes), p.Writes)
	if p.LatencyP99Ms > 0 {
		s += fmt.Sprintf(", create→Ready p50 %.0fms p99 %.0fms", p.LatencyP50Ms, p.LatencyP99Ms)
	}
	return s
}

func (r *Restart) summary() string {
	return fmt.Sprintf("synced after %.2fs, idle after %.2fs, %.0f writes, %.0f requests", r.SyncedSeconds, r.IdleSeconds, r.Writes, sumMap(r.Requests))
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

func (r *Result) phase(name string) *Phase {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func ratios(r *Result) []Ratio {
	var out []Ratio
	met := func(ok bool) *bool { return &ok }
	div := func(name, a, b string, field func(*Phase) float64, bar string, ok func(float64) bool) {
		pa, pb := r.phase(a), r.phase(b)
		if pa == nil || pb == nil || field(pb) == 0 {
			return
		}
		v := round(field(pa)/field(pb), 2)
		x := Ratio{Name: name, Value: v, Bar: bar}
		if ok != nil {
			x.Met = met(ok(v))
		}
		out = append(out, x)
	}
	rate := func(p *Phase) float64 { return p.BooksPerSecond }
	rss := func(p *Phase) float64 { return float64(p.PeakRSSBytes) }
	cpu := func(p *Phase) float64 { return p.CPUSeconds }
	div("ours / API ceiling (Books/s, backlog)", "ours-backlog", "ceiling", rate, "≥ 0.8 (aim 0.9)", func(v float64) bool { return v >= 0.8 })
	div("ours / API ceiling with Events (Books/s, backlog)", "ours-backlog", "ceiling-events", rate, "(reference: the ceiling plus the Event the twin posts per Book)", nil)
	div("ours / twin same workers (Books/s, backlog)", "ours-backlog", "twin-same-backlog", rate, "≥ 1.0", func(v float64) bool { return v >= 1.0 })
	div("ours / twin defaults (Books/s, backlog)", "ours-backlog", "twin-default-backlog", rate, "≥ 1.5", func(v float64) bool { return v >= 1.5 })
	div("ours / twin same workers (Books/s, live)", "ours-live", "twin-same-live", rate, "", nil)
	div("ours / twin defaults (Books/s, live)", "ours-live", "twin-default-live", rate, "", nil)
	div("ours live / API ceiling (Books/s)", "ours-live", "ceiling", rate, "", nil)
	rssBar := "≤ 0.7 at N=10000"
	rssOK := func(v float64) bool { return v <= 0.7 }
	if r.N < 10000 {
		rssOK = nil
		rssBar = "(bar applies at N=10000)"
	}
	div("ours / twin same workers (peak RSS, backlog)", "ours-backlog", "twin-same-backlog", rss, rssBar, rssOK)
	div("ours / twin defaults (peak RSS, backlog)", "ours-backlog", "twin-default-backlog", rss, rssBar, rssOK)
	div("ours / twin same workers (CPU s, backlog)", "ours-backlog", "twin-same-backlog", cpu, "", nil)
	if r.Restart != nil {
		// Zero writes count only if every Book was synced: a restart whose
		// workers never started would write nothing too.
		out = append(out, Ratio{Name: "writes on restart", Value: r.Restart.Writes, Bar: "= 0, every Book reconciled",
			Met: met(r.Restart.Writes == 0 && r.Restart.Reconciles >= float64(r.Restart.N))})
	}
	for _, n := range []string{"ours-live", "ours-paced"} {
		if p := r.phase(n); p != nil && p.LatencyP99Ms > 0 {
			label := "p99 create→Ready, full creation speed (s)"
			if n == "ours-paced" {
				label = fmt.Sprintf("p99 create→Ready, paced at %.0f Books/s (s)", p.CreateRate)
			}
			out = append(out, Ratio{Name: label, Value: round(p.LatencyP99Ms/1000, 3), Bar: "≤ 1 s", Met: met(p.LatencyP99Ms <= 1000)})
		}
	}
	return out
}

func write(o options, r *Result) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	base := filepath.Join(o.out, o.label)
	if err := writeJSON(base+".json", r); err != nil {
		return err
	}
	charts := map[string]string{}
	for _, c := range []struct{ suffix, title, mode string }{
		{".png", "Backlog: N Books pre-created, controller started at t=0", "backlog"},
		{"-live.png", "Live: controller running, N Books created from t=0", "live"},
	} {
		ok, err := chart(r, base+c.suffix, c.title, c.mode)
		if err != nil {
			return err
		}
		if ok {
			charts[c.mode] = filepath.Base(base + c.suffix)
		}
	}
	md := markdown(r, charts)
	if err := os.WriteFile(base+".md", []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	logf("wrote %s.{md,json} and charts", base)
	return nil
}

func markdown(r *Result, charts map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "N = %d Books per phase, client concurrency C = %d; %d cores (%s), %s, %s; load average at start %s; %s.\n\n",
		r.N, r.C, r.Machine.Cores, r.Machine.CPU, r.Machine.GoVersion, r.Machine.OS, r.Machine.LoadAvgStart, r.Started)
	if r.WarmUp {
		fmt.Fprintf(&b, "An unmeasured warm-up round (the load generator over %d Books) ran before the phases.\n\n", r.N)
	}
	fmt.Fprintln(&b, "| Phase | Controller (workers; client limit) | Books/s | Converged (s) | create→Ready p50 / p99 (ms) | CPU (s) | Peak RSS | Peak heap in use | Requests by verb | Writes |")
	fmt.Fprintln(&b, "|---|---|--:|--:|--:|--:|--:|--:|---|--:|")
	for _, p := range r.Phases {
		lat := "–"
		if p.LatencyP99Ms > 0 {
			lat = fmt.Sprintf("%.0f / %.0f", p.LatencyP50Ms, p.LatencyP99Ms)
		}
		name := p.Name
		if p.CreateRate > 0 {
			name += fmt.Sprintf(" (%.0f/s)", p.CreateRate)
		}
		cpu := "–"
		if p.Mode != "ceiling" {
			cpu = fmt.Sprintf("%.2f", p.CPUSeconds)
		}
		fmt.Fprintf(&b, "| %s | %s (%d; %s) | %.0f | %.2f | %s | %s | %s | %s | %s | %.0f |\n",
			name, p.Controller, p.Workers, shortLimit(p.ClientLimit), p.BooksPerSecond, p.ConvergeSeconds, lat, cpu,
			mib(p.PeakRSSBytes), mib(p.PeakHeapInuseBytes), verbs(p.Requests), p.Writes)
	}
	if x := r.Restart; x != nil {
		fmt.Fprintf(&b, "\nRestart of book-controller over %d converged Books: caches synced (readyz 200) after %.2f s, idle (queue empty, no request for %.0f s) after %.2f s; %.0f reconciles, requests %s, **%.0f writes**.\n",
			x.N, x.SyncedSeconds, x.QuietWindowSeconds, x.IdleSeconds, x.Reconciles, verbs(x.Requests), x.Writes)
	}
	if p := r.phase("ours-backlog"); p != nil && p.N > 0 {
		fmt.Fprintf(&b, "\nbook-controller memory per cached Book (backlog, N=%d; process baseline included): peak RSS %.1f KiB, heap in use at the end %.1f KiB.\n",
			p.N, float64(p.PeakRSSBytes)/1024/float64(p.N), float64(p.EndHeapInuseBytes)/1024/float64(p.N))
	}
	if q := r.phase("twin-same-backlog"); q != nil && q.N > 0 {
		fmt.Fprintf(&b, "Twin (same workers): peak RSS %.1f KiB, heap in use at the end %.1f KiB per Book.\n",
			float64(q.PeakRSSBytes)/1024/float64(q.N), float64(q.EndHeapInuseBytes)/1024/float64(q.N))
	}
	fmt.Fprintln(&b, "\n| Ratio | Value | Bar | Met |")
	fmt.Fprintln(&b, "|---|--:|---|---|")
	for _, x := range r.Ratios {
		m := ""
		if x.Met != nil {
			m = map[bool]string{true: "yes", false: "**no**"}[*x.Met]
		}
		fmt.Fprintf(&b, "| %s | %g | %s | %s |\n", x.Name, x.Value, x.Bar, m)
	}
	if c, ok := charts["backlog"]; ok {
		fmt.Fprintf(&b, "\n![Ready Books over time, backlog](%s)\n", c)
	}
	if c, ok := charts["live"]; ok {
		fmt.Fprintf(&b, "\n![Ready Books over time, live](%s)\n", c)
	}
	return b.String()
}

func shortLimit(s string) string {
	if i := strings.Index(s, " ("); i >= 0 {
		return s[:i]
	}
	return s
}

func verbs(m map[string]float64) string {
	if len(m) == 0 {
		return "–"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func chart(r *Result, path, title, mode string) (bool, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "Books Ready"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	n := 0
	for _, ph := range r.Phases {
		if ph.Mode != mode && (mode != "backlog" || ph.Mode != "ceiling") {
			continue
		}
		if len(ph.Series) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(ph.Series))
		for i, s := range ph.Series {
			xys[i].X, xys[i].Y = s[0], s[1]
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return false, err
		}
		l.Width = vg.Points(2)
		l.Color = plotutil.Color(n)
		if ph.Mode == "ceiling" {
			l.Color = color.Gray{Y: uint8(60 + 60*len(ph.Name)%120)}
			l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		label := fmt.Sprintf("%s (%s, %d workers): %.0f/s", ph.Name, ph.Controller, ph.Workers, ph.BooksPerSecond)
		if ph.CreateRate > 0 {
			label = fmt.Sprintf("%s (created at %.0f/s): %.0f/s", ph.Name, ph.CreateRate, ph.BooksPerSecond)
		}
		p.Legend.Add(label, l)
		n++
	}
	if n == 0 {
		return false, nil
	}
	return true, p.Save(9*vg.Inch, 5*vg.Inch, path)
}
