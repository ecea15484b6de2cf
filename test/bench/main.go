// Command bench measures how fast book-controller converges Books against a
// real kube-apiserver, next to the API's own ceiling for the same writes and
// to the controller-runtime twin in examples/controller-runtime. It is a
// program, not a test: `make bench` (or `go run . -n 2000 -c 16` in
// test/bench) writes a Markdown table, a JSON file and PNG charts.
//
// Every controller runs as a separate process (the built binaries), so its
// CPU time and peak RSS come from /proc/<pid>; its heap and API requests
// come from its own /metrics. Phases run one after the other, never
// overlapping, each in a fresh namespace that the controller is confined to
// with --namespace. docs/benchmark.md explains each figure.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/test/integration/framework"
)

type options struct {
	n           int
	c           int
	out         string
	workers     int
	qps         string
	burst       string
	pacedRate   float64
	phases      string
	maxBusy     float64
	maxLoad     float64
	timeout     time.Duration
	label       string
	ourArgs     string
	twinLogInfo bool
	kubeconfig  string
	oursBin     string
	keep        bool
	warmUp      bool
}

func main() {
	o := options{}
	flag.IntVar(&o.n, "n", 2000, "Books per phase")
	flag.IntVar(&o.c, "c", 16, "client concurrency of the Book creator and of the API-ceiling load generator")
	flag.StringVar(&o.out, "out", "", "directory for latest.md, latest.json and the charts (default <repo>/docs/bench)")
	flag.IntVar(&o.workers, "workers", 0, "book-controller --workers, and the twin's --max-concurrent-reconciles in the same-workers run; 0: book-controller's default")
	flag.StringVar(&o.qps, "kube-api-qps", "", "book-controller --kube-api-qps (empty: its default)")
	flag.StringVar(&o.burst, "kube-api-burst", "", "book-controller --kube-api-burst (empty: its default)")
	flag.Float64Var(&o.pacedRate, "paced-rate", 100, "also run book-controller with Books created at this many per second (0: skip)")
	flag.StringVar(&o.phases, "phases", "all", "comma-separated phases to run: "+strings.Join(allPhases, ","))
	flag.Float64Var(&o.maxBusy, "max-busy", 0.6, "before each phase, wait (up to 2 min) until the machine's other work uses fewer than this many cores")
	flag.Float64Var(&o.maxLoad, "max-load", 1.5, "before starting, wait (up to 5 min) until the 1-minute load average is below this")
	flag.DurationVar(&o.timeout, "phase-timeout", 0, "give up on a phase after this long (default 60s + N/20 s)")
	flag.StringVar(&o.label, "label", "latest", "base name of the output files")
	flag.StringVar(&o.ourArgs, "our-args", "", "extra arguments for book-controller (space-separated), e.g. for lever experiments")
	flag.BoolVar(&o.twinLogInfo, "twin-log-info", true, "run the twin with --zap-log-level=info (its scaffold default, development mode, logs every reconcile at debug level)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "use this cluster instead of starting a local control plane (default $KUBECONFIG; empty: local)")
	flag.BoolVar(&o.warmUp, "warm-up", true, "before the measured phases, run the API-ceiling load generator once over N Books, unmeasured, so the first phase does not meet the API server's cold watch caches")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (built binaries, each controller's log) and print its path")
	flag.StringVar(&o.oursBin, "ours-bin", "", "use this prebuilt book-controller instead of building ./cmd/controller (lever experiments)")
	flag.Parse()
	if o.out == "" {
		o.out = filepath.Join(framework.RepoRoot(), "docs", "bench")
	}
	if o.timeout == 0 {
		o.timeout = 60*time.Second + time.Duration(o.n/20)*time.Second
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

var allPhases = []string{"ours-live", "restart", "ours-paced", "ceiling", "ceiling-events", "ours-backlog",
	"twin-same-backlog", "twin-default-backlog", "twin-same-live", "twin-default-live"}

type env struct {
	o        options
	cfg      *rest.Config
	kube     kubernetes.Interface // protobuf, as book-controller's
	books    versioned.Interface
	kubecfg  string
	cluster  *localcluster.Cluster
	work     string
	ours     string
	twin     string
	ourWork  int
	ourQPS   string
	ourBurst string
	res      *Result
}

func run(ctx context.Context, o options) error {
	res := &Result{Started: time.Now().UTC().Format(time.RFC3339), N: o.n, C: o.c}
	res.Machine = machine()
	logf("machine: %d cores, %s, load average %s", res.Machine.Cores, res.Machine.GoVersion, res.Machine.LoadAvgStart)
	waitLoad(ctx, o.maxLoad)

	work, err := os.MkdirTemp("", "book-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		defer logf("kept %s (binaries and controller logs)", work)
	} else {
		defer os.RemoveAll(work)
	}
	e := &env{o: o, work: work, res: res}

	// Build both controllers the way the Makefile does, one after the other.
	root := framework.RepoRoot()
	e.ours = filepath.Join(work, "book-controller")
	e.twin = filepath.Join(work, "book-controller-runtime")
	for _, b := range []struct{ out, dir, pkg string }{
		{e.ours, root, "./cmd/controller"},
		{e.twin, filepath.Join(root, "examples", "controller-runtime"), "./cmd"},
	} {
		if b.out == e.ours && o.oursBin != "" {
			e.ours = o.oursBin
			continue
		}
		logf("building %s", b.out)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s: %w", b.pkg, err)
		}
	}
	e.ourWork, e.ourQPS, e.ourBurst = controllerDefaults(e.ours)
	if o.workers > 0 {
		e.ourWork = o.workers
	}
	if o.qps != "" {
		e.ourQPS = o.qps
	}
	if o.burst != "" {
		e.ourBurst = o.burst
	}

	if kc := o.kubeconfig; kc != "" {
		res.Cluster = "KUBECONFIG=" + kc
		e.kubecfg = kc
		if e.cfg, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
			return err
		}
	} else {
		logf("starting a local control plane")
		bin, err := localcluster.EnsureBinaries(ctx, root)
		if err != nil {
			return err
		}
		cl, err := localcluster.Start(ctx, localcluster.Options{BinDir: bin})
		if err != nil {
			return err
		}
		defer func() {
			if err := cl.Stop(); err != nil {
				logf("stopping the local cluster: %v", err)
			}
		}()
		e.cluster = cl
		e.kubecfg = cl.KubeconfigPath()
		e.cfg = cl.RESTConfig()
		res.Cluster = "local (pkg/localcluster: etcd, kube-apiserver, kube-controller-manager " + filepath.Base(filepath.Dir(bin)) + ")"
	}
	e.cfg.QPS, e.cfg.Burst = -1, 0
	e.cfg.UserAgent = "book-bench"
	pcfg := rest.CopyConfig(e.cfg)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if e.kube, err = kubernetes.NewForConfig(pcfg); err != nil {
		return err
	}
	if e.books, err = versioned.NewForConfig(e.cfg); err != nil {
		return err
	}
	ext, err := apiextensionsclient.NewForConfig(e.cfg)
	if err != nil {
		return err
	}
	if err := framework.InstallCRD(ctx, ext); err != nil {
		return err
	}

	want := map[string]bool{}
	for _, p := range strings.Split(o.phases, ",") {
		want[strings.TrimSpace(p)] = true
	}
	sel := func(p string) bool { return want["all"] || want[p] }
	var namespaces []string
	defer func() {
		if e.cluster == nil {
			for _, ns := range namespaces {
				_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, deleteOpts)
			}
		}
	}()
	add := func(p *Phase, err error) error {
		if p != nil {
			namespaces = append(namespaces, p.Namespace)
			res.Phases = append(res.Phases, p)
			logf("%s: %s", p.Name, p.summary())
		}
		return err
	}

	if o.warmUp {
		// A fresh API server starts each resource's watch cache small, and
		// with it every watcher's buffer (10 events); a watcher that falls
		// behind is closed, and an informer whose re-watch is closed at once
		// backs off for about a second. Phases later in a run meet a cache
		// grown by the earlier ones; one unmeasured round gives the first
		// measured phase the same server.
		res.WarmUp = true
		p, err := e.ceilingPhase(ctx, "warm-up", false)
		if p != nil {
			namespaces = append(namespaces, p.Namespace)
			logf("warm-up (not measured): %s", p.summary())
		}
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	ours := e.ourController()
	same := e.twinController(e.ourWork)
	def := e.twinController(0)
	var live *Phase
	if sel("ours-live") {
		p, err := e.livePhase(ctx, "ours-live", ours, 0)
		live = p
		if err := add(p, err); err != nil {
			return err
		}
	}
	if sel("restart") && live != nil {
		r, err := e.restartPhase(ctx, live, ours)
		res.Restart = r
		if r != nil {
			logf("restart: %s", r.summary())
		}
		if err != nil {
			return err
		}
	}
	if o.pacedRate > 0 && sel("ours-paced") {
		if err := add(e.livePhase(ctx, "ours-paced", ours, o.pacedRate)); err != nil {
			return err
		}
	}
	if sel("ceiling") {
		if err := add(e.ceilingPhase(ctx, "ceiling", false)); err != nil {
			return err
		}
	}
	if sel("ceiling-events") {
		if err := add(e.ceilingPhase(ctx, "ceiling-events", true)); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		name string
		c    controllerSpec
		live bool
	}{
		{"ours-backlog", ours, false},
		{"twin-same-backlog", same, false},
		{"twin-default-backlog", def, false},
		{"twin-same-live", same, true},
		{"twin-default-live", def, true},
	} {
		if !sel(x.name) {
			continue
		}
		var err error
		if x.live {
			err = add(e.livePhase(ctx, x.name, x.c, 0))
		} else {
			err = add(e.backlogPhase(ctx, x.name, x.c))
		}
		if err != nil {
			return err
		}
	}
	res.Finished = time.Now().UTC().Format(time.RFC3339)
	res.Ratios = ratios(res)
	return write(o, res)
}

func controllerDefaults(bin string) (workers int, qps, burst string) {
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	workers, qps, burst = 8, "500", "1000"
	for _, line := range strings.Split(string(out), "\n") {
		def := ""
		if i := strings.Index(line, "(default "); i >= 0 {
			def = strings.TrimSuffix(strings.TrimSpace(line[i+len("(default "):]), ")")
		}
		switch {
		case def == "":
		case strings.Contains(line, "--workers "):
			fmt.Sscan(def, &workers)
		case strings.Contains(line, "--kube-api-qps "):
			qps = def
		case strings.Contains(line, "--kube-api-burst "):
			burst = def
		}
	}
	return workers, qps, burst
}

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

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
