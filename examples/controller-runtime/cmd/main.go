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

// Command main runs the controller-runtime twin of book-controller: the same
// Book behaviour, wired the way a kubebuilder project's cmd/main.go is.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"

	"ydzs.io/book-controller/examples/controller-runtime/internal/controller"
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(webappv2.AddToScheme(scheme))
	// +kubebuilder:scaffold:scheme
}

func main() {
	var metricsAddr string
	var probeAddr string
	var enableLeaderElection bool
	var secureMetrics bool
	var enableHTTP2 bool
	var maxConcurrentReconciles int
	var namespace string
	var conflictRecheck time.Duration
	var pprofAddr string
	// Levers controller-runtime offers beyond the scaffold; each default is
	// the scaffold's behaviour. The bench's twin-tuned run turns them on
	// (docs/benchmark.md, "Fairness").
	var tune tuning
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to. "+
		"Use :8443 for HTTPS or :8080 for HTTP, or leave as 0 to disable the metrics service.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "The address the probe endpoint binds to. "+
		"Use 0 to disable the probes.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0",
		"The address Go profiles (net/http/pprof) are served on (controller-runtime's PprofBindAddress), or 0 for none.")
	flag.BoolVar(&enableLeaderElection, "leader-elect", false,
		"Enable leader election for controller manager. "+
			"Enabling this will ensure there is only one active controller manager.")
	flag.BoolVar(&secureMetrics, "metrics-secure", true,
		"If set, the metrics endpoint is served securely via HTTPS. Use --metrics-secure=false to use HTTP instead.")
	flag.BoolVar(&enableHTTP2, "enable-http2", false,
		"If set, HTTP/2 will be enabled for the metrics server")
	flag.IntVar(&maxConcurrentReconciles, "max-concurrent-reconciles", 1,
		"Number of Books reconciled concurrently (controller-runtime's MaxConcurrentReconciles).")
	flag.StringVar(&namespace, "namespace", "",
		"Only watch (and cache) objects in this namespace. Empty watches all namespaces.")
	flag.DurationVar(&conflictRecheck, "conflict-recheck", controller.DefaultConflictRecheck,
		"How often a Book whose ConfigMap name is taken by a foreign ConfigMap is looked at again.")
	tune.bindFlags(flag.CommandLine)
	opts := zap.Options{
		Development: true,
	}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	if maxConcurrentReconciles < 1 {
		fail(fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", maxConcurrentReconciles), "invalid flags")
	}
	if conflictRecheck <= 0 {
		fail(fmt.Errorf("--conflict-recheck must be positive, got %s", conflictRecheck), "invalid flags")
	}
	if err := tune.validate(); err != nil {
		fail(err, "invalid flags")
	}

	// HTTP/2 is off by default because of the HTTP/2 Stream Cancellation and
	// Rapid Reset CVEs; kubebuilder's scaffold does the same.
	var tlsOpts []func(*tls.Config)
	if !enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) {
			setupLog.Info("disabling http/2")
			c.NextProtos = []string{"http/1.1"}
		})
	}

	metricsServerOptions := metricsserver.Options{
		BindAddress:   metricsAddr,
		SecureServing: secureMetrics,
		TLSOpts:       tlsOpts,
	}
	if secureMetrics {
		// Only callers that pass a TokenReview and a SubjectAccessReview for
		// GET /metrics may scrape.
		metricsServerOptions.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	var cacheOpts cache.Options
	if namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	restConfig := ctrl.GetConfigOrDie()
	tune.applyToConfig(restConfig)
	if err := tune.applyToCache(&cacheOpts, restConfig); err != nil {
		fail(err, "unable to configure the cache")
	}

	var clientOpts client.Options
	tune.applyToClient(&clientOpts)
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Client:                 clientOpts,
		Metrics:                metricsServerOptions,
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
		LeaderElection:         enableLeaderElection,
		LeaderElectionID:       "book-controller-runtime.webapp.ydzs.io",
		// Out of a cluster there is no namespace to default to; with
		// --namespace the lease lives next to the Books.
		LeaderElectionNamespace: namespace,
		Controller: config.Controller{
			MaxConcurrentReconciles: maxConcurrentReconciles,
			UsePriorityQueue:        &tune.usePriorityQueue,
		},
	})
	if err != nil {
		fail(err, "unable to create manager")
	}

	if err := checkBookAPI(restConfig, mgr.GetRESTMapper()); err != nil {
		fail(err, "unable to start manager")
	}

	reconciler := &controller.BookReconciler{
		Client:           mgr.GetClient(),
		Scheme:           mgr.GetScheme(),
		Recorder:         controller.NewDroppingRecorder(mgr.GetEventRecorder(controller.ReportingController), float32(tune.eventQPS), tune.eventBurst),
		ConflictRecheck:  conflictRecheck,
		StatusMergePatch: tune.statusMergePatch,

		GenerationChangedOnly: tune.generationChanged,
	}
	if tune.configMapsByLabel {
		reconciler.LiveReader = mgr.GetAPIReader()
	}
	if err := reconciler.SetupWithManager(mgr); err != nil {
		fail(err, "unable to create controller", "controller", "Book")
	}
	// +kubebuilder:scaffold:builder

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		fail(err, "unable to set up health check")
	}
	readyz := healthz.Ping
	if tune.readyzCacheSync {
		readyz = cachesSynced(mgr.GetCache())
	}
	if err := mgr.AddReadyzCheck("readyz", readyz); err != nil {
		fail(err, "unable to set up ready check")
	}

	setupLog.Info("starting manager", "namespace", namespace, "maxConcurrentReconciles", maxConcurrentReconciles)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(err, "problem running manager")
	}
}

// checkBookAPI fails fast, naming the fix, when the Book CRD is not installed.
// Without it the manager would keep retrying the Book informer and give up
// only when the cache sync timeout (two minutes) passes.
func checkBookAPI(cfg *rest.Config, mapper meta.RESTMapper) error {
	gk := schema.GroupKind{Group: webappv2.GroupName, Kind: "Book"}
	_, err := mapper.RESTMapping(gk, webappv2.SchemeGroupVersion.Version)
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err):
		return fmt.Errorf("the Book CRD (books.%s) is not installed in the cluster at %s, or is one without %s: run `kubectl apply -f manifests/crd.yaml`",
			webappv2.GroupName, cfg.Host, webappv2.SchemeGroupVersion)
	default:
		return fmt.Errorf("checking the Book API at %s: %w", cfg.Host, err)
	}
}

// cachesSynced is a readyz check that passes once the Book and ConfigMap
// informers have synced. The scaffold's healthz.Ping passes as soon as the
// probe server listens, before the controller has seen anything.
func cachesSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		for _, obj := range []client.Object{&webappv2.Book{}, &corev1.ConfigMap{}} {
			inf, err := c.GetInformer(req.Context(), obj, cache.BlockUntilSynced(false))
			if err != nil {
				return err
			}
			if !inf.HasSynced() {
				return fmt.Errorf("%T cache not synced yet", obj)
			}
		}
		return nil
	}
}

func fail(err error, msg string, keysAndValues ...any) {
	setupLog.Error(err, msg, keysAndValues...)
	os.Exit(1)
}
