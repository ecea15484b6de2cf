// Package manager wires the Book controller into a running process: API
// clients, informers, events and the controller's Run. It is the
// hand-written counterpart of controller-runtime's Manager, and is what both
// cmd/controller and the integration tests start.
package manager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/metrics"
)

// Config is everything Run needs. Zero values of the optional fields pick
// the documented defaults.
type Config struct {
	// RESTConfig reaches the API server; QPS and Burst are taken as given.
	RESTConfig *rest.Config
	// Namespace limits the controller to one namespace; empty means all.
	Namespace string
	// Workers is the number of goroutines that sync Books concurrently.
	Workers int
	// ResyncPeriod replays the informer caches to the handlers; 0 disables it.
	ResyncPeriod time.Duration
	// Controller tunes the controller itself.
	Controller controller.Options
	// LeaderElection, when enabled, runs the workers only in the replica
	// that holds the Lease; the others keep warm caches and stand by.
	LeaderElection LeaderElection
	// MetricsAddr serves Prometheus metrics on /metrics; "" or "0" is off.
	MetricsAddr string
	// MetricsSecure serves them over HTTPS to authorized callers only, with
	// the certificate in MetricsCertDir or a self-signed one (metricsauth.go).
	MetricsSecure  bool
	MetricsCertDir string
	// ProbeAddr serves /healthz and /readyz; "" or "0" is off.
	ProbeAddr string
	// EventQPS and EventBurst limit the Events this process sends; Events
	// over the rate are dropped (see controller.NewEventRecorder). Zero
	// means no limit.
	EventQPS   float32
	EventBurst int
}

// Run checks that the API server is usable, starts the informers and the
// controller, and blocks until ctx ends and the controller has drained.
func Run(ctx context.Context, cfg Config) error {
	if cfg.RESTConfig == nil {
		return errors.New("manager: RESTConfig is required")
	}
	logger := klog.FromContext(ctx)

	kubeClient, err := kubernetes.NewForConfig(coreTypesConfig(cfg.RESTConfig))
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	bookClient, err := versioned.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return fmt.Errorf("creating Book client: %w", err)
	}
	if err := Preflight(ctx, cfg.RESTConfig.Host, kubeClient.Discovery().RESTClient()); err != nil {
		if ctx.Err() != nil {
			// Asked to stop while checking: a clean stop, not a failure.
			return nil
		}
		return err
	}

	// Events outlive ctx by the drain: the last syncs may still report.
	eventCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	recorder, err := controller.NewEventRecorder(eventCtx, kubeClient, cfg.EventQPS, cfg.EventBurst)
	if err != nil {
		return err
	}

	kubeFactory, bookFactory := controller.NewInformerFactories(kubeClient, bookClient, cfg.Namespace, cfg.ResyncPeriod)
	bookInformer := bookFactory.Webapp().V1().Books()
	c, err := controller.New(kubeClient, bookClient, bookInformer, kubeFactory.Core().V1().ConfigMaps(),
		recorder, cfg.Controller)
	if err != nil {
		return err
	}

	le := cfg.LeaderElection
	var watchdog *leaderelection.HealthzAdaptor
	if le.Enabled {
		le = withLeaderElectionDefaults(le)
		if err := PreflightLease(ctx, kubeClient.CoordinationV1(), le.Namespace, le.ID); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		// A leader that has not renewed for this long past its lease is
		// stuck; /healthz fails so the kubelet restarts it.
		watchdog = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	own := newManagerMetrics(le, bookInformer.Lister())
	metricsServer, err := listenMetrics(ctx, cfg, kubeClient, metrics.Handler(own.registry))
	if err != nil {
		return err
	}
	probeServer, err := listen("--health-probe-bind-address", cfg.ProbeAddr, probeHandler(c.HasSynced, watchdog))
	if err != nil {
		metricsServer.close()
		return err
	}
	// The endpoints stay up through the drain and stop when Run returns.
	serveCtx, stopServing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServing()
	metricsServer.serve(serveCtx)
	probeServer.serve(serveCtx)

	// Informers start before leadership is decided, so a standby replica
	// has warm caches the moment it takes over.
	kubeFactory.Start(ctx.Done())
	bookFactory.Start(ctx.Done())
	defer kubeFactory.Shutdown()
	defer bookFactory.Shutdown()

	logger.Info("Starting Book controller", "namespace", namespaceOrAll(cfg.Namespace), "workers", cfg.Workers,
		"leaderElection", le.Enabled)
	if !le.Enabled {
		own.leader.Set(1)
		return c.Run(ctx, cfg.Workers)
	}
	return runLeading(ctx, le, kubeClient, c, cfg.Workers, own.leader, watchdog)
}

// coreTypesConfig returns a copy of cfg that talks protobuf, which built-in
// types support and which is cheaper to encode and decode than JSON. Custom
// resources only speak JSON, so the Book client keeps the original.
func coreTypesConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

func namespaceOrAll(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}
