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
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url" // fork:line ui
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/shard"   // fork:line shards
	"ydzs.io/book-controller/pkg/webhook" // fork:line v2
)

// options are the command-line settings: where the API server is and how
// fast to talk to it, and everything else as the manager takes it. Every
// default comes from pkg/manager/defaults.go.
type options struct {
	kubeconfig string
	master     string
	qps        float32
	burst      int
	// liveFirst is --live-first, and disableLayers --disable-layers; parse
	// turns both into mgr.Controller.Off.
	liveFirst     bool
	disableLayers []string
	// fork:begin shards
	// shardBoundaries is the removed --shard-boundaries, refused with
	// the reason.
	shardBoundaries []string
	// fork:end shards
	// showVersion is --version: print the version and exit.
	showVersion bool
	// mgr is passed to manager.Run, with the client configuration.
	mgr manager.Config
}

// newOptions returns the defaults.
func newOptions() *options {
	return &options{
		qps:       manager.DefaultKubeAPIQPS,
		burst:     manager.DefaultKubeAPIBurst,
		liveFirst: true,
		mgr:       manager.Defaults(),
	}
}

// flagSet registers the flags, klog's included, on a fresh FlagSet.
func (o *options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("book-controller", pflag.ContinueOnError)
	fs.BoolVar(&o.showVersion, "version", false, "Print the version, the commit and the Go version it was built from, and exit.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig,
		"Path to a kubeconfig. Defaults to $KUBECONFIG; when both are empty, the in-cluster configuration is used.")
	fs.StringVar(&o.master, "master", o.master,
		"Address of the Kubernetes API server. Overrides the server in the kubeconfig.")
	fs.StringVar(&o.mgr.Namespace, "namespace", o.mgr.Namespace,
		"Only watch Books in this namespace. Empty watches all namespaces.")
	fs.IntVar(&o.mgr.Workers, "workers", o.mgr.Workers,
		"Number of Books synced concurrently (with shards, in each shard held).")
	// fork:begin shards
	fs.IntVar(&o.mgr.Shards, "shards", o.mgr.Shards,
		"Split the Books by a hash of their UID into this many shards, each served by the replica holding the Lease <leader-elect-id>-shard-<i>. Needs --leader-elect and kube-apiserver's ShardedListAndWatch feature gate. 1: unsharded.")
	// Gone since Books are sharded by UID; kept hidden to say so.
	fs.StringSliceVar(&o.shardBoundaries, "shard-boundaries", nil, "")
	_ = fs.MarkHidden("shard-boundaries")
	// fork:end shards
	fs.BoolVar(&o.liveFirst, "live-first", o.liveFirst,
		"Sync Books that a live change brought before those only the informers' initial list brought (after a restart or a failover). false: arrival order, the same as --disable-layers=live-first.")
	fs.StringSliceVar(&o.disableLayers, "disable-layers", o.disableLayers,
		"Optimization layers to turn off, each leaving the loop as sample-controller's (docs/tour.md): "+
			strings.Join(controller.LayerNames(), ", ")+`, or "all". Default: none.`)
	fs.DurationVar(&o.mgr.ResyncPeriod, "resync-period", o.mgr.ResyncPeriod,
		"How often the informers replay their caches to the controller; 0 disables resync.")
	fs.DurationVar(&o.mgr.Controller.ConflictRecheck, "conflict-recheck", o.mgr.Controller.ConflictRecheck,
		"How often a Book whose ConfigMap name is held by another object, or by its own ConfigMap on its way out, is looked at again.")
	fs.Float32Var(&o.qps, "kube-api-qps", o.qps,
		"Requests per second the controller may send to the API server (client-side limit).")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst,
		"Requests the controller may send in a burst above --kube-api-qps.")
	o.serverFlags(fs)
	o.leaderElectionFlags(fs)
	fs.Float32Var(&o.mgr.EventQPS, "event-qps", o.mgr.EventQPS,
		"Events per second sent to the API server; Events over the rate are dropped (they are best effort). 0: no limit.")
	fs.IntVar(&o.mgr.EventBurst, "event-burst", o.mgr.EventBurst,
		"Events that may be sent in a burst above --event-qps.")
	// fork:begin v2
	fs.BoolVar(&o.mgr.StorageMigration, "storage-migration", o.mgr.StorageMigration,
		"While leading, keep the Book CRD's status.storedVersions down to its storage version: create a StorageVersionMigration when it lists another version, and once that has succeeded, drop the other versions (docs/api-versions.md). Needs kube-controller-manager's storage-version-migrator-controller. Not with --shards.")
	// fork:end v2

	goFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	return fs
}

// serverFlags registers the flags of the metrics, probe and pprof servers.
func (o *options) serverFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.mgr.MetricsAddr, "metrics-bind-address", o.mgr.MetricsAddr,
		`Address to serve Prometheus metrics on /metrics, e.g. ":8080"; "0" turns it off.`)
	fs.BoolVar(&o.mgr.MetricsSecure, "metrics-secure", o.mgr.MetricsSecure,
		"Serve metrics over HTTPS, only to callers whose bearer token the API server accepts (TokenReview) and who may get the path (SubjectAccessReview; the metrics-reader ClusterRole). The Deployment turns it on.")
	fs.StringVar(&o.mgr.MetricsCertDir, "metrics-cert-dir", o.mgr.MetricsCertDir,
		"Directory holding tls.crt and tls.key for --metrics-secure, reloaded when they change. Empty: a self-signed certificate generated at start.")
	fs.StringVar(&o.mgr.ProbeAddr, "health-probe-bind-address", o.mgr.ProbeAddr,
		`Address to serve /healthz and /readyz on; "0" turns it off.`)
	fs.StringVar(&o.mgr.PprofAddr, "pprof-bind-address", o.mgr.PprofAddr,
		`Address to serve Go profiles on /debug/pprof/ (net/http/pprof), e.g. "127.0.0.1:6060"; "0" turns it off. Unauthenticated: bind it to localhost.`)
	// fork:begin v2
	fs.StringVar(&o.mgr.Webhook.Addr, "webhook-bind-address", o.mgr.Webhook.Addr,
		`Address to serve the Book CRD's conversion webhook on over TLS, at /convert, when the CRD converts through it (manifests/crd.yaml names its Service; docs/api-versions.md); "0" turns it off.`)
	fs.StringVar(&o.mgr.Webhook.CertDir, "webhook-cert-dir", o.mgr.Webhook.CertDir,
		"Directory holding the webhook's tls.crt and tls.key (a cert-manager Certificate's Secret, mounted), reloaded when they change; the CRD's caBundle is then cert-manager's CA injector's to write. Empty: the webhook keeps its own CA and certificate in the Secret "+webhook.DefaultSecretName+" and writes the CA into the CRD.")
	fs.BoolVar(&o.mgr.Webhook.Loopback, "webhook-loopback", o.mgr.Webhook.Loopback,
		"Point the CRD's conversion webhook at https://127.0.0.1:<port>/convert instead of the Service: for a controller run outside the cluster, next to a local API server (make run).")
	fs.BoolVar(&o.mgr.Webhook.Only, "webhook-only", o.mgr.Webhook.Only,
		"Serve the conversion webhook, /metrics and the probes, and nothing else: no informers, no Lease, no controller. A Deployment of its own that keeps conversion available while the controller runs a build without a webhook, as after a rollback (docs/api-versions.md).")
	// fork:end v2
	// fork:begin ui
	fs.StringVar(&o.mgr.UISourceURL, "ui-source-url", o.mgr.UISourceURL,
		`With --ui-bind-address: where the live view's links to this repository's files point (a path such as pkg/controller/handlers.go is appended), e.g. "https://github.com/you/book-controller/blob/main/"; empty: https://ydzs.io/book-controller/blob/main/.`)
	fs.StringVar(&o.mgr.UIAddr, "ui-bind-address", o.mgr.UIAddr,
		`Address to serve the live view of the controller on (docs/ui.md), e.g. "127.0.0.1:8082"; "0" turns it off. It shows Books and the controller's internals: bind it to localhost, or add --metrics-secure to serve it as the metrics are.`)
	// fork:end ui
}

// leaderElectionFlags registers the --leader-elect flags.
func (o *options) leaderElectionFlags(fs *pflag.FlagSet) {
	le := &o.mgr.LeaderElection
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled,
		"Run workers only while holding a coordination.k8s.io Lease, so that replicas can stand by.")
	fs.StringVar(&le.Namespace, "leader-elect-namespace", le.Namespace,
		"Namespace of the Lease. Defaults to the pod's namespace, or \"default\" outside a cluster.")
	fs.StringVar(&le.ID, "leader-elect-id", le.ID, "Name of the Lease.")
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", le.LeaseDuration,
		"How long standbys wait after the last renewal before taking over.")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", le.RenewDeadline,
		"How long after sending its last successful renewal the leader stops writing and exits.")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", le.RetryPeriod,
		"How often replicas try to acquire or renew the Lease.")
}

// errHelp is returned by parse when the user asked for --help; the usage has
// then been written and the process should exit 0.
var errHelp = errors.New("help requested")

// errVersion is returned by parse when the user asked for --version; the
// version has then been written and the process should exit 0.
var errVersion = errors.New("version requested")

// parse parses args (without the program name) into a fresh options, or
// writes the usage (--help) or the version (--version) to usageOut. It
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
	// Before any other check, as kube's components: --version answers
	// whatever else the command line holds.
	if o.showVersion {
		fmt.Fprintln(usageOut, versionLine())
		return nil, errVersion
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: book-controller takes only flags; run with --help to list them", fs.Arg(0))
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	off, err := controller.ParseLayers(o.disableLayers)
	if err != nil {
		return nil, fmt.Errorf("--disable-layers: %v", err)
	}
	off.LiveFirst = off.LiveFirst || !o.liveFirst
	o.mgr.Controller.Off = off
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
	m, le := &o.mgr, &o.mgr.LeaderElection
	switch {
	// fork:begin shards
	case len(o.shardBoundaries) > 0:
		return errors.New("--shard-boundaries is gone: Books are sharded by the hash of their UID, which spreads them evenly whatever the namespaces; drop the flag (docs/sharding.md)")
	// fork:end shards
	case m.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", m.Workers)
	// fork:begin shards
	case m.Shards < 1:
		return fmt.Errorf("--shards must be at least 1 (1: unsharded), got %d", m.Shards)
	case m.Shards > shard.Max:
		return fmt.Errorf("--shards must be at most %d, got %d", shard.Max, m.Shards)
	case m.Shards > 1 && !le.Enabled:
		return fmt.Errorf("--shards %d needs --leader-elect: each shard is served by the replica holding its Lease", m.Shards)
	// fork:end shards
	case m.ResyncPeriod < 0:
		return fmt.Errorf("--resync-period must be 0 (off) or positive, got %s", m.ResyncPeriod)
	case m.Controller.ConflictRecheck <= 0:
		return fmt.Errorf("--conflict-recheck must be positive, got %s", m.Controller.ConflictRecheck)
	case m.MetricsCertDir != "" && !m.MetricsSecure:
		return fmt.Errorf("--metrics-cert-dir %q is only used with --metrics-secure: add --metrics-secure, or drop --metrics-cert-dir", m.MetricsCertDir)
	// fork:begin v2
	case m.Webhook.Loopback && m.Webhook.CertDir != "":
		return fmt.Errorf("--webhook-loopback needs the webhook's own certificates, whose CA it writes into the CRD with the URL: drop --webhook-cert-dir, or --webhook-loopback")
	case m.Webhook.Only && (m.Webhook.Addr == "" || m.Webhook.Addr == "0"):
		return fmt.Errorf("--webhook-only serves nothing with --webhook-bind-address %q: give it an address, or drop --webhook-only", m.Webhook.Addr)
	case m.Webhook.Only && le.Enabled:
		return fmt.Errorf("--webhook-only runs no controller, so it has no Lease to hold: drop --leader-elect (every replica serves the webhook)")
	// fork:end v2
	case m.Namespace != "" && len(m.Namespace) > 63:
		return fmt.Errorf("--namespace %q is longer than 63 characters and cannot name a namespace", m.Namespace)
	}
	if err := o.validateRates(); err != nil {
		return err
	}
	if err := validateLeaderElection(le); err != nil {
		return err
	}
	// fork:begin ui
	if err := o.validateUISourceURL(); err != nil {
		return err
	}
	// fork:end ui
	return nil
}

// validateRates checks the client-side limits of API requests and Events.
func (o *options) validateRates() error {
	m := &o.mgr
	switch {
	case o.qps == 0:
		// client-go reads a QPS of 0 as "unset" and applies its default of 5.
		return fmt.Errorf("--kube-api-qps must be positive, or -1 to disable client-side rate limiting; got 0, which client-go would turn into 5")
	case o.qps < 0 && o.qps != -1:
		return fmt.Errorf("--kube-api-qps must be positive, or -1 to disable client-side rate limiting; got %v", o.qps)
	case o.burst < 1 && o.qps != -1:
		return fmt.Errorf("--kube-api-burst must be at least 1, got %d", o.burst)
	case m.EventQPS < 0:
		return fmt.Errorf("--event-qps must be 0 (no limit) or positive, got %v", m.EventQPS)
	case m.EventQPS > 0 && m.EventBurst < 1:
		return fmt.Errorf("--event-burst must be at least 1, got %d", m.EventBurst)
	}
	return nil
}

// validateLeaderElection checks the Lease timings against each other, as
// client-go's leaderelection would refuse them at start.
func validateLeaderElection(le *manager.LeaderElection) error {
	switch {
	case le.LeaseDuration <= le.RenewDeadline:
		return fmt.Errorf("--leader-elect-lease-duration (%s) must be longer than --leader-elect-renew-deadline (%s)",
			le.LeaseDuration, le.RenewDeadline)
	case le.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period must be positive, got %s", le.RetryPeriod)
	case float64(le.RenewDeadline) <= leaderelection.JitterFactor*float64(le.RetryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline (%s) must be longer than %.1f x --leader-elect-retry-period (%s)",
			le.RenewDeadline, leaderelection.JitterFactor, le.RetryPeriod)
	case le.ID == "":
		return fmt.Errorf("--leader-elect-id must not be empty")
	}
	return nil
}

// fork:begin ui
// validateUISourceURL checks --ui-source-url, and ends it with a slash so
// that a file's path can be appended.
func (o *options) validateUISourceURL() error {
	u := o.mgr.UISourceURL
	if u == "" {
		return nil
	}
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
		return fmt.Errorf("--ui-source-url %q: want an absolute http(s) URL such as https://github.com/you/book-controller/blob/main/", u)
	}
	if !strings.HasSuffix(u, "/") {
		o.mgr.UISourceURL = u + "/"
	}
	return nil
}

// fork:end ui
