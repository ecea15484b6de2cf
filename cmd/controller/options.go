package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/manager"
)

// options are the command-line settings. Defaults live in newOptions.
type options struct {
	kubeconfig   string
	master       string
	namespace    string
	workers      int
	resyncPeriod time.Duration
	qps          float32
	burst        int
	eventQPS     float32
	eventBurst   int

	metricsAddr    string
	metricsSecure  bool
	metricsCertDir string
	probeAddr      string
	leaderElection manager.LeaderElection
}

// newOptions returns the defaults. client-go's own 5 QPS / 10 burst would
// cap a controller at a few Books per second. At 500 QPS the limit still
// bound (docs/benchmark.md): each Book costs two requests on the core client
// (ConfigMap, Event). 2000/4000 is above what an API server takes from one
// client, so its priority-and-fairness paces us, while a runaway loop is
// still capped.
func newOptions() *options {
	return &options{
		// A sync is two round trips to the API server, 0.1–0.3 s under a
		// burst, and almost no CPU. To keep up with Books arriving at rate λ
		// takes λ × that many syncs in flight (Little's law): about 100 for
		// the 650 Books/s a 2-core API server accepts. With 32 the queue
		// grew and create→Ready p99 reached 1.5 s; with 128 it stays under
		// 1 s (docs/benchmark.md). Idle workers cost a parked goroutine.
		workers:      128,
		resyncPeriod: 10 * time.Hour,
		qps:          2000,
		burst:        4000,
		// Plenty for people reading Events. In a burst of thousands of
		// Books most are dropped whatever the limit; a low one leaves the
		// API server to the writes that make Books Ready: the kubelet's
		// 50/100 cost about 30 % on create→Ready p99 (docs/benchmark.md).
		eventQPS:   10,
		eventBurst: 25,
		// As kubebuilder's scaffold: metrics off unless asked for (the
		// Deployment asks), probes on the port its manifests use.
		metricsAddr: "0",
		probeAddr:   ":8081",
		leaderElection: manager.LeaderElection{
			ID:            manager.DefaultLeaderElectionID,
			LeaseDuration: manager.DefaultLeaseDuration,
			RenewDeadline: manager.DefaultRenewDeadline,
			RetryPeriod:   manager.DefaultRetryPeriod,
		},
	}
}

// flagSet registers the flags, klog's included, on a fresh FlagSet.
func (o *options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("book-controller", pflag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig,
		"Path to a kubeconfig. Defaults to $KUBECONFIG; when both are empty, the in-cluster configuration is used.")
	fs.StringVar(&o.master, "master", o.master,
		"Address of the Kubernetes API server. Overrides the server in the kubeconfig.")
	fs.StringVar(&o.namespace, "namespace", o.namespace,
		"Only watch Books in this namespace. Empty watches all namespaces.")
	fs.IntVar(&o.workers, "workers", o.workers,
		"Number of Books synced concurrently.")
	fs.DurationVar(&o.resyncPeriod, "resync-period", o.resyncPeriod,
		"How often the informers replay their caches to the controller; 0 disables resync.")
	fs.Float32Var(&o.qps, "kube-api-qps", o.qps,
		"Requests per second the controller may send to the API server (client-side limit).")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst,
		"Requests the controller may send in a burst above --kube-api-qps.")

	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr,
		`Address to serve Prometheus metrics on /metrics, e.g. ":8080"; "0" turns it off.`)
	fs.BoolVar(&o.metricsSecure, "metrics-secure", o.metricsSecure,
		"Serve metrics over HTTPS, only to callers whose bearer token the API server accepts (TokenReview) and who may get the path (SubjectAccessReview; the metrics-reader ClusterRole). The Deployment turns it on.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", o.metricsCertDir,
		"Directory holding tls.crt and tls.key for --metrics-secure, reloaded when they change. Empty: a self-signed certificate generated at start.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", o.probeAddr,
		`Address to serve /healthz and /readyz on; "0" turns it off.`)

	le := &o.leaderElection
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled,
		"Run workers only while holding a coordination.k8s.io Lease, so that replicas can stand by.")
	fs.StringVar(&le.Namespace, "leader-elect-namespace", le.Namespace,
		"Namespace of the Lease. Defaults to the pod's namespace, or \"default\" outside a cluster.")
	fs.StringVar(&le.ID, "leader-elect-id", le.ID, "Name of the Lease.")
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration,
		"How long standbys wait after the last renewal before taking over.")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline,
		"How long the leader keeps trying to renew before it stops working and exits.")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod,
		"How often replicas try to acquire or renew the Lease.")

	fs.Float32Var(&o.eventQPS, "event-qps", o.eventQPS,
		"Events per second sent to the API server; Events over the rate are dropped (they are best effort). 0: no limit.")
	fs.IntVar(&o.eventBurst, "event-burst", o.eventBurst,
		"Events that may be sent in a burst above --event-qps.")

	goFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	return fs
}

// errHelp is returned by parse when the user asked for --help; the usage has
// then been written and the process should exit 0.
var errHelp = errors.New("help requested")

// parse parses args (without the program name) into a fresh options. It
// accepts the Go-style single dash that sample-controller and the lesson use
// (-kubeconfig=PATH, -kubeconfig PATH) next to pflag's --kubeconfig.
func parse(args []string, usageOut io.Writer) (*options, error) {
	o := newOptions()
	fs := o.flagSet()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(goStyleToPosix(fs, args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(usageOut, "Usage of book-controller:\n%s", fs.FlagUsages())
			return nil, errHelp
		}
		return nil, fmt.Errorf("%v; run with --help to list the flags", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: book-controller takes only flags; run with --help to list them", fs.Arg(0))
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// goStyleToPosix rewrites "-name[=value]" to "--name[=value]" when name is a
// known long flag. Single-letter flags (klog's -v) already work with one dash
// and arguments after "--" are left alone.
func goStyleToPosix(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	expectValue := false
	for i, arg := range args {
		if arg == "--" {
			return append(out, args[i:]...)
		}
		if expectValue {
			// The value of the previous flag, even if it starts with a dash.
			out = append(out, arg)
			expectValue = false
			continue
		}
		if len(arg) > 2 && arg[0] == '-' && arg[1] != '-' {
			name, _, hasValue := strings.Cut(arg[1:], "=")
			if f := fs.Lookup(name); f != nil && len(name) > 1 {
				arg = "-" + arg
				expectValue = !hasValue && f.NoOptDefVal == ""
			}
		} else if strings.HasPrefix(arg, "--") {
			name, _, hasValue := strings.Cut(arg[2:], "=")
			if f := fs.Lookup(name); f != nil {
				expectValue = !hasValue && f.NoOptDefVal == ""
			}
		}
		out = append(out, arg)
	}
	return out
}

// validate rejects values that parse but make no sense, naming the flag.
func (o *options) validate() error {
	switch {
	case o.workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", o.workers)
	case o.resyncPeriod < 0:
		return fmt.Errorf("--resync-period must be 0 (off) or positive, got %s", o.resyncPeriod)
	case o.qps == 0:
		// client-go reads a QPS of 0 as "unset" and applies its default of 5.
		return fmt.Errorf("--kube-api-qps must be positive, or -1 to disable client-side rate limiting; got 0, which client-go would turn into 5")
	case o.qps < 0 && o.qps != -1:
		return fmt.Errorf("--kube-api-qps must be positive, or -1 to disable client-side rate limiting; got %v", o.qps)
	case o.burst < 1 && o.qps != -1:
		return fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.burst)
	case o.eventQPS < 0:
		return fmt.Errorf("--event-qps must be 0 (no limit) or positive, got %v", o.eventQPS)
	case o.eventQPS > 0 && o.eventBurst < 1:
		return fmt.Errorf("--event-burst must be at least 1, got %d", o.eventBurst)
	case o.leaderElection.LeaseDuration <= o.leaderElection.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be longer than --leader-elect-renew-deadline (%s)",
			o.leaderElection.LeaseDuration, o.leaderElection.RenewDeadline)
	case o.leaderElection.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be positive, got %s", o.leaderElection.RetryPeriod)
	case float64(o.leaderElection.RenewDeadline) <= leaderelection.JitterFactor*float64(o.leaderElection.RetryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than %.1f x --leader-elect-retry-period (%s)",
			o.leaderElection.RenewDeadline, leaderelection.JitterFactor, o.leaderElection.RetryPeriod)
	case o.leaderElection.ID == "":
		return fmt.Errorf("--leader-elect-id must not be empty")
	case o.metricsCertDir != "" && !o.metricsSecure:
		return fmt.Errorf("--metrics-cert-dir %q is only used with --metrics-secure: add --metrics-secure, or drop --metrics-cert-dir", o.metricsCertDir)
	case o.namespace != "" && len(o.namespace) > 63:
		return fmt.Errorf("--namespace %q is longer than 63 characters and cannot name a namespace", o.namespace)
	}
	return nil
}
