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
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
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
		return err
	}

	// Events outlive ctx by the drain: the last syncs may still report.
	eventCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEvents()
	recorder, err := controller.NewEventRecorder(eventCtx, kubeClient)
	if err != nil {
		return err
	}

	kubeFactory, bookFactory := controller.NewInformerFactories(kubeClient, bookClient, cfg.Namespace, cfg.ResyncPeriod)
	c, err := controller.New(kubeClient, bookClient,
		bookFactory.Webapp().V1().Books(), kubeFactory.Core().V1().ConfigMaps(),
		recorder, cfg.Controller)
	if err != nil {
		return err
	}
	kubeFactory.Start(ctx.Done())
	bookFactory.Start(ctx.Done())
	defer kubeFactory.Shutdown()
	defer bookFactory.Shutdown()

	logger.Info("Starting Book controller", "namespace", namespaceOrAll(cfg.Namespace), "workers", cfg.Workers)
	return c.Run(ctx, cfg.Workers)
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
