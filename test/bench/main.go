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

// Command bench measures how fast book-controller converges Books against a
// real kube-apiserver, next to the API's own ceiling for the same writes and
// to the controller-runtime twin in examples/controller-runtime in three
// configurations (the scaffold's defaults, the same workers, and every lever
// the framework offers). It is a program, not a test: `make bench` (or
// `go run . -n 2000` in test/bench) writes a Markdown report, the raw JSON of
// every round and PNG charts.
//
// Every controller runs as a separate process (the built binaries), so its
// CPU time and peak RSS come from /proc/<pid>; its heap and API requests
// come from its own /metrics. Phases run one after the other, never
// overlapping, each in a fresh namespace that the controller is confined to
// with --namespace and that is deleted (and waited for) when the phase ends.
// Each round runs the phases in another order. docs/benchmark.md explains
// each figure and each bar.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
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
	report          string
	restartFloor    bool
	n               int
	c               int
	ceilingC        []int
	rounds          int
	seed            int64
	out             string
	workers         int
	qps             string
	burst           string
	phases          map[string]bool
	maxBusy         float64
	maxLoad         float64
	timeout         time.Duration
	label           string
	ourArgs         string
	twinLogInfo     bool
	twinGOGC        string
	twinTunedArgs   string
	kubeconfig      string
	oursBin         string
	keep            bool
	warmUp          bool
	capacityP99     time.Duration
	capacityStart   float64
	capacityStep    float64
	capacityTries   int
	capacityConfigs []string
	pacedCreators   int
	preCreateConcy  int
	shards          int
	bounds          int
	shardNamespaces int
	liveConfigs     []string
	deleteWorkers   int
	// profileDir, when set, receives the CPU profiles of kube-apiserver
	// and the controller in each backlog phase, profileFor long from the
	// controller's start.
	profileDir string
	profileFor time.Duration
	// fork:begin v2
	conversion     bool
	convNamespaces int
	convWatchCache bool
	pageSize       int
	// migration runs -migration; migrationTimeout bounds its wait for
	// storedVersions [v2].
	migration        bool
	migrationTimeout time.Duration
	// fork:end v2
}

// defaultLabel is -label's default.
const defaultLabel = "latest"

// fork:begin v2

// bookResource is the Book resource as kube-apiserver's --watch-cache-sizes names it.
const bookResource = "books.webapp.ydzs.io"

// fork:end v2

func main() {
	o := options{}
	var phases, ceilingC string
	flag.IntVar(&o.n, "n", 2000, "Books per phase")
	flag.IntVar(&o.c, "c", 16, "concurrency of the Book creators in live phases (full speed)")
	flag.StringVar(&ceilingC, "ceiling-c", "16,64,128,256", "writer concurrencies of the API-ceiling load generator; the ceiling is the best of them")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each runs the phases in another order, and each ratio is reported as the median with min–max over rounds")
	flag.Int64Var(&o.seed, "seed", 0, "seed of the phase order (0: from the clock; the seed used is printed and recorded)")
	flag.StringVar(&o.out, "out", "", "directory for <label>.md, <label>.json and the charts (default <repo>/docs/bench)")
	flag.IntVar(&o.workers, "workers", 0, "book-controller --workers, and the twin's --max-concurrent-reconciles in the same-workers and tuned runs; 0: book-controller's default")
	flag.StringVar(&o.qps, "kube-api-qps", "", "book-controller --kube-api-qps (empty: its default)")
	flag.StringVar(&o.burst, "kube-api-burst", "", "book-controller --kube-api-burst (empty: its default)")
	flag.StringVar(&phases, "phases", "default", "comma-separated phases (or 'default', 'all'; at -n 50000 and above 'default' is "+strings.Join(largePhases, ",")+"): "+strings.Join(allPhases, ","))
	flag.Float64Var(&o.maxBusy, "max-busy", 0.6, "before each phase, wait (up to 2 min) until the machine's other work uses fewer than this many cores")
	flag.Float64Var(&o.maxLoad, "max-load", 1.5, "before starting, wait (up to 5 min) until the 1-minute load average is below this")
	flag.DurationVar(&o.timeout, "phase-timeout", 0, "give up on a phase after this long (default 60s + N/20 s)")
	flag.StringVar(&o.label, "label", defaultLabel, "base name of the output files")
	flag.StringVar(&o.ourArgs, "our-args", "", "extra arguments for book-controller (space-separated), e.g. for lever experiments")
	flag.BoolVar(&o.twinLogInfo, "twin-log-info", true, "run the twin with --zap-log-level=info (its scaffold default, development mode, logs every reconcile at debug level)")
	flag.StringVar(&o.twinGOGC, "twin-tuned-gogc", "50", "GOGC of the tuned twin: book-controller's built-in setting (cmd/controller/main.go)")
	flag.StringVar(&o.twinTunedArgs, "twin-tuned-args", "", "the tuned twin's lever flags, space-separated, instead of framework.TwinTunedArgs (experiments, e.g. without --read-your-writes)")
	flag.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "use this cluster instead of starting a local control plane (default $KUBECONFIG; empty: local)")
	flag.BoolVar(&o.warmUp, "warm-up", true, "before the first round, run the API-ceiling load generator once over N Books, unmeasured, so the first phase does not meet the API server's cold watch caches")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory (built binaries, each controller's log, per-Book create and Ready times of live phases) and print its path")
	flag.StringVar(&o.oursBin, "ours-bin", "", "use this prebuilt book-controller instead of building ./cmd/controller (lever experiments)")
	flag.DurationVar(&o.capacityP99, "capacity-p99", time.Second, "latency target of the capacity search: the highest paced creation rate with p99 create→Ready at most this")
	flag.Float64Var(&o.capacityStart, "capacity-start", 0.7, "first creation rate the capacity search tries, as a fraction of the round's live ceiling")
	flag.Func("capacity-configs", "comma-separated capacity searches to run (default ceiling,ours,twin-tuned; the bars need all three)", func(v string) error {
		o.capacityConfigs = nil
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); !slices.Contains([]string{"ceiling", "ours", "twin-tuned"}, c) {
				return fmt.Errorf("unknown capacity search %q; known: ceiling, ours, twin-tuned", c)
			}
			o.capacityConfigs = append(o.capacityConfigs, c)
		}
		return nil
	})
	o.liveConfigs = restartLiveConfigs
	flag.Func("live-configs", "comma-separated configurations of restart-live and failover-live (default "+strings.Join(restartLiveConfigs, ",")+")", func(v string) error {
		o.liveConfigs = nil
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); !slices.Contains(restartLiveConfigs, c) {
				return fmt.Errorf("unknown configuration %q; known: %s", c, strings.Join(restartLiveConfigs, ", "))
			}
			o.liveConfigs = append(o.liveConfigs, c)
		}
		return nil
	})
	flag.IntVar(&o.deleteWorkers, "delete-collection-workers", 8, "kube-apiserver --delete-collection-workers of the local control plane: how fast a phase's namespace is emptied (not measured)")
	flag.IntVar(&o.capacityTries, "capacity-tries", 2, "runs of a capacity step before it counts as failed (a stall of the shared API server can fail one run)")
	flag.Float64Var(&o.capacityStep, "capacity-step", 0.1, "step of the capacity search, as a fraction of the round's live ceiling")
	flag.IntVar(&o.pacedCreators, "paced-creators", 128, "concurrent creators in paced phases, enough that the pace and not the creators sets the rate")
	flag.IntVar(&o.preCreateConcy, "pre-create-c", 64, "concurrency of the unmeasured Book creation before backlog and ceiling phases")
	flag.BoolVar(&o.restartFloor, "restart-floor", true, "before each restart phase, time the API server streaming the same lists to a client that only reads them (the floor)")
	flag.StringVar(&o.report, "report", "", "run nothing: recompute the bars and costs of an earlier run's JSON (this path) and write its report again under -out and -label")
	flag.IntVar(&o.shards, "shards", 0, "instead of the phases: compare one unsharded replica with this many replicas running --shards (make bench-shards)")
	flag.IntVar(&o.shardNamespaces, "shard-namespaces", 30, "with -shards: namespaces the N Books are spread over")
	// fork:begin v2
	flag.BoolVar(&o.conversion, "conversion", false, "instead of the phases: the price of conversion (make bench-conversion): N Books created as v2 under manifests/crd.yaml, listed -rounds times each as v2 and as v1 (through the controller's conversion webhook); writes conversion.md and conversion.json (conversion-<label>.* with a -label of its own). With -report <conversion.json>: run nothing, write that run's report again (with its \"showed\" notes)")
	flag.BoolVar(&o.migration, "migration", false, "instead of the phases: the storage migration's time (make bench-migration): N Books created through v1 under the v1-only CRD of v0.9.0, the CRD switched to manifests/crd.yaml, then this build's controller started (webhook on 127.0.0.1, leader election) until its migrator has storedVersions [v2]; writes migration.md and migration.json (migration-<label>.* with a -label of its own). With -report <migration.json>: run nothing, write that run's report again")
	flag.DurationVar(&o.migrationTimeout, "migration-timeout", 30*time.Minute, "with -migration: give up waiting for storedVersions [v2] after this long")
	flag.IntVar(&o.convNamespaces, "conversion-namespaces", 4, "with -conversion or -migration: namespaces the N Books are spread over")
	flag.BoolVar(&o.convWatchCache, "conversion-watch-cache", true, "with -conversion: keep the API server's watch cache for Books; false starts it with --watch-cache-sizes=books.webapp.ydzs.io#0, so that every list reads etcd and converts what it reads")
	flag.IntVar(&o.pageSize, "page-size", 500, "with -conversion: Books per page of each list (the limit informers and kubectl use)")
	// fork:end v2
	flag.IntVar(&o.bounds, "bounds", 0, "instead of the phases: run the tests that keep wall-clock bounds this many times and write bounds.md and bounds.json (make bench-bounds)")
	flag.StringVar(&o.profileDir, "profile", "", "directory for the CPU profiles of kube-apiserver and of the controller (book-controller, ours or 'v1') in each backlog phase (r<round>-<phase>-kube-apiserver.pprof, -controller.pprof; go tool pprof reads them); empty: none")
	flag.DurationVar(&o.profileFor, "profile-seconds", 5*time.Second, "with -profile: how long each profile runs from the controller's start (make it about the phase's converge time)")
	flag.Parse()
	if err := o.finish(phases, ceilingC); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}

	if o.report != "" {
		rerun := rereport
		// fork:begin v2
		if o.conversion {
			rerun = rereportConversion
		}
		if o.migration {
			rerun = rereportMigration
		}
		// fork:end v2
		if err := rerun(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if o.bounds > 0 {
		if err := measureBounds(ctx, o, o.bounds); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// finish checks the flags and fills in the derived options.
func (o *options) finish(phases, ceilingC string) error {
	if o.bounds < 0 {
		return fmt.Errorf("-bounds %d: want the number of runs, or 0 for the phases", o.bounds)
	}
	// fork:begin v2
	if o.conversion && (o.shards > 0 || o.bounds > 0 || o.migration) {
		return fmt.Errorf("-conversion is a mode of its own: not with -shards, -bounds or -migration")
	}
	if o.migration && (o.shards > 0 || o.bounds > 0) {
		return fmt.Errorf("-migration is a mode of its own: not with -shards or -bounds")
	}
	if o.convNamespaces < 1 || o.pageSize < 1 {
		return fmt.Errorf("-conversion-namespaces and -page-size must be at least 1")
	}
	// fork:end v2
	if o.shards < 0 || o.shards == 1 || o.shards > 64 || o.shardNamespaces < 1 {
		return fmt.Errorf("-shards must be 0 (the phases) or 2 to 64, and -shard-namespaces at least 1")
	}
	if o.n < 1 || o.c < 1 || o.rounds < 1 || o.pacedCreators < 1 || o.preCreateConcy < 1 {
		return fmt.Errorf("-n, -c, -rounds, -paced-creators and -pre-create-c must be at least 1")
	}
	if len(o.capacityConfigs) == 0 {
		o.capacityConfigs = []string{"ceiling", "ours", "twin-tuned"}
	}
	if o.capacityTries < 1 {
		return fmt.Errorf("-capacity-tries %d: want at least 1", o.capacityTries)
	}
	if o.capacityStart <= 0 || o.capacityStep <= 0 {
		return fmt.Errorf("-capacity-start and -capacity-step must be positive fractions of the live ceiling, e.g. 0.7 and 0.1")
	}
	for _, s := range strings.Split(ceilingC, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || c < 1 {
			return fmt.Errorf("-ceiling-c %q: want a comma-separated list of positive integers, e.g. 16,64,128,256", ceilingC)
		}
		o.ceilingC = append(o.ceilingC, c)
	}
	var err error
	if o.phases, err = selectPhases(phases, o.n); err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(framework.RepoRoot(), "docs", "bench")
	}
	if o.timeout == 0 {
		o.timeout = 60*time.Second + time.Duration(o.n/20)*time.Second
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano() % 1_000_000
	}
	return nil
}

type env struct {
	o     options
	cfg   *rest.Config
	kube  kubernetes.Interface // protobuf, as book-controller's
	books versioned.Interface
	// watch is the client of the watches that time Ready, on a connection
	// of its own (watchConfig).
	watch    versioned.Interface
	ext      apiextensionsclient.Interface
	kubecfg  string
	cluster  *localcluster.Cluster
	work     string
	ours     string
	twin     string
	defaults controllerDefaults
	res      *Result
	progress *progress
	round    int // the round running, for names
	// fork:begin v2
	// v1 is the last v1-only release's controller (v1phase.go), and
	// stopConversion stops the test conversion webhook while one runs.
	v1             string
	stopConversion func()
	// fork:end v2
}

func run(ctx context.Context, o options) error {
	res := &Result{Started: time.Now().UTC().Format(time.RFC3339), N: o.n, C: o.c, CeilingC: o.ceilingC,
		RoundCount: o.rounds, Seed: o.seed, CapacityP99Ms: float64(o.capacityP99.Milliseconds()), CapacityTries: o.capacityTries}
	res.Machine = machine()
	logf("machine: %d cores, %s, load average %s", res.Machine.Cores, res.Machine.GoVersion, res.Machine.LoadAvgStart)
	waitLoad(ctx, o.maxLoad)

	work, err := os.MkdirTemp("", "book-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		defer logf("kept %s (binaries, controller logs, per-Book times)", work)
	} else {
		defer os.RemoveAll(work)
	}
	e := &env{o: o, work: work, res: res}
	if err := e.build(ctx); err != nil {
		return err
	}
	stop, err := e.connect(ctx)
	if err != nil {
		return err
	}
	defer stop()
	if o.shards > 0 {
		return e.runShards(ctx)
	}
	// fork:begin v2
	if o.conversion {
		return e.runConversion(ctx)
	}
	if o.migration {
		return e.runMigration(ctx)
	}
	// fork:end v2

	if o.warmUp {
		res.WarmUp = true
		if err := e.warmUp(ctx, "warm-up"); err != nil {
			return err
		}
	}

	plan := e.plan()
	e.progress = newProgress(o.rounds, len(plan), o.phases["capacity"])
	logf("phase order seed %d (rerun with -seed %d for the same orders)", o.seed, o.seed)
	for i := range o.rounds {
		r, err := e.runRound(ctx, i+1, plan)
		if r != nil {
			res.Rounds = append(res.Rounds, r)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
	}
	res.Finished = time.Now().UTC().Format(time.RFC3339)
	return score(o, res)
}

// warmUp runs the load generator over N Books, unmeasured. A fresh API
// server (or a new CRD) starts each resource's watch cache small, and with
// it every watcher's buffer (10 events); a watcher that falls behind is
// closed, and an informer whose re-watch is closed at once backs off for
// about a second. One unmeasured round gives the first measured phase a
// server like the later ones meet.
func (e *env) warmUp(ctx context.Context, why string) error {
	logf("%s (not measured): the load generator over %d Books", why, e.o.n)
	p, err := e.ceilingPhase(ctx, "warm-up", e.o.c, false)
	if p != nil {
		if derr := e.deleteNamespace(ctx, p); derr != nil && err == nil {
			err = derr
		}
		logf("%s: %s", why, p.summary())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", why, err)
	}
	return nil
}

// score computes the bars and costs of res and writes its report.
func score(o options, res *Result) error {
	res.Bars = bars(res)
	res.Costs = costs(res)
	return write(o, res)
}

// rereport writes the report of an earlier run's raw figures again, with
// the bars and costs as this version of the bench computes them.
func rereport(o options) error {
	b, err := os.ReadFile(o.report)
	if err != nil {
		return fmt.Errorf("-report: %w", err)
	}
	res := &Result{}
	if err := json.Unmarshal(b, res); err != nil {
		return fmt.Errorf("-report %s: not a bench result: %w", o.report, err)
	}
	return score(o, res)
}

// build compiles both controllers the way the Makefile does, one after the
// other.
func (e *env) build(ctx context.Context) error {
	root := framework.RepoRoot()
	e.ours = filepath.Join(e.work, "book-controller")
	e.twin = filepath.Join(e.work, "book-controller-runtime")
	for _, b := range []struct{ out, dir, pkg string }{
		{e.ours, root, "./cmd/controller"},
		{e.twin, filepath.Join(root, "examples", "controller-runtime"), "./cmd"},
	} {
		if b.out == e.ours && e.o.oursBin != "" {
			e.ours = e.o.oursBin
			continue
		}
		if b.out == e.twin && e.o.shards > 0 {
			continue // the shard comparison runs ours only
		}
		// fork:begin v2
		if b.out == e.twin && (e.o.conversion || e.o.migration) {
			continue // so do the conversion and the migration
		}
		// fork:end v2
		logf("building %s", b.out)
		// -tags grpcnotrace as the Dockerfile builds ours: both binaries
		// link gRPC (through k8s.io/apiserver's metrics authentication),
		// which without it doubles them (see docs/deploy.md).
		cmd := exec.CommandContext(ctx, "go", "build", "-tags", "grpcnotrace", "-trimpath", "-gcflags=all=-dwarf=false", "-o", b.out, b.pkg)
		cmd.Dir = b.dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s: %w", b.pkg, err)
		}
	}
	// fork:begin v2
	if err := e.buildV1(); err != nil {
		return err
	}
	// fork:end v2
	e.defaults = readDefaults(e.ours)
	if e.o.workers > 0 {
		e.defaults.workers = e.o.workers
	}
	if e.o.qps != "" {
		e.defaults.qps = e.o.qps
	}
	if e.o.burst != "" {
		e.defaults.burst = e.o.burst
	}
	return nil
}

// connect starts a local control plane (or uses -kubeconfig's cluster),
// makes the bench's clients and installs the Book CRD. The returned func
// stops what connect started.
func (e *env) connect(ctx context.Context) (func(), error) {
	stop := func() {}
	var err error
	if kc := e.o.kubeconfig; kc != "" {
		e.res.Cluster = "KUBECONFIG=" + kc
		e.kubecfg = kc
		if e.cfg, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
			return stop, err
		}
	} else {
		logf("starting a local control plane")
		bin, err := localcluster.EnsureBinaries(ctx, framework.RepoRoot())
		if err != nil {
			return stop, err
		}
		// ShardedListAndWatch for -shards; it changes nothing for lists
		// and watches without a shard selector.
		// Deleting a phase's namespace is not measured, but at N = 50000
		// it took 3 to 4 minutes with the API server's one default
		// DeleteCollection worker; more workers delete the namespace's Books
		// and ConfigMaps in parallel.
		apiArgs := []string{"--delete-collection-workers=" + strconv.Itoa(e.o.deleteWorkers)}
		// fork:begin v2
		if e.o.conversion && !e.o.convWatchCache {
			apiArgs = append(apiArgs, "--watch-cache-sizes="+bookResource+"#0")
		}
		// fork:end v2
		cl, err := localcluster.Start(ctx, localcluster.Options{BinDir: bin, ShardedListAndWatch: true, APIServerArgs: apiArgs})
		if err != nil {
			return stop, err
		}
		stop = func() {
			if err := cl.Stop(); err != nil {
				logf("stopping the local cluster: %v", err)
			}
		}
		e.cluster = cl
		e.kubecfg = cl.KubeconfigPath()
		e.cfg = cl.RESTConfig()
		e.res.Cluster = "local (pkg/localcluster: etcd, kube-apiserver, kube-controller-manager " + filepath.Base(filepath.Dir(bin)) + ")"
	}
	e.cfg.QPS, e.cfg.Burst = -1, 0
	// fork:begin v2
	if e.o.conversion {
		// Every v1 page is answered with the deprecation warning, which
		// client-go would log 2 × N / -page-size times a round.
		e.cfg.WarningHandler = rest.NoWarnings{}
	}
	// fork:end v2
	e.cfg.UserAgent = "book-bench"
	pcfg := rest.CopyConfig(e.cfg)
	pcfg.ContentType = "application/vnd.kubernetes.protobuf"
	pcfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if e.kube, err = kubernetes.NewForConfig(pcfg); err != nil {
		return stop, err
	}
	if e.books, err = versioned.NewForConfig(e.cfg); err != nil {
		return stop, err
	}
	if e.watch, err = versioned.NewForConfig(watchConfig(e.cfg)); err != nil {
		return stop, err
	}
	if e.ext, err = apiextensionsclient.NewForConfig(e.cfg); err != nil {
		return stop, err
	}
	// fork:begin v2
	if e.o.migration {
		// Books are created as v1, stored as v1, under the CRD of the
		// releases before v2; the bench then switches it (switchToV2).
		crd, err := framework.V1OnlyCRD()
		if err != nil {
			return stop, err
		}
		return stop, framework.ApplyCRD(ctx, e.ext, crd)
	}
	// fork:end v2
	if err := framework.InstallCRD(ctx, e.ext); err != nil {
		return stop, err
	}
	// fork:begin v2
	if e.cluster != nil && !e.o.conversion {
		// The API server's v1 watch cache converts every Book written, so
		// the webhook must answer for the whole run, whichever controller
		// runs: the test environments' process (framework.ServeConversion).
		// -conversion measures the controller's own webhook instead.
		if e.stopConversion, err = framework.ServeConversion(ctx, e.kubecfg); err != nil {
			return stop, err
		}
		stopCluster := stop
		stop = func() {
			// v1-backlog restarts the webhook when it swaps the CRDs.
			if e.stopConversion != nil {
				e.stopConversion()
			}
			stopCluster()
		}
	}
	// fork:end v2
	return stop, nil
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

// watchConfig is cfg for the watches that time Ready, on a TCP connection
// of their own. client-go shares one HTTP/2 connection among the clients of
// equal configs, and on the connection of up to 256 writers a watch's
// events wait behind their requests and answers: with 128 writers the
// Ready events arrived seconds after the writes (create→Ready p50 2.6 s at
// 254 Books/s, with no request slower than 0.5 s at the API server). Any
// Proxy function makes client-go build a transport of its own; this one
// connects directly, as the shared one does.
func watchConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	return c
}
