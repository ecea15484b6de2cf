package framework

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"ydzs.io/book-controller/pkg/manager"
)

// ControllerOptions adjust an in-process controller. Defaults suit tests: a
// short conflict recheck so a removed foreign ConfigMap is noticed quickly.
type ControllerOptions struct {
	// Namespace restricts the controller; empty watches all namespaces.
	Namespace string
	// Workers defaults to 4.
	Workers int
	// RESTConfig overrides the admin configuration (a counting transport,
	// another user).
	RESTConfig *rest.Config
}

// RunningController is a controller started by StartController.
type RunningController struct {
	cancel context.CancelFunc
	done   chan error
}

// StartController runs the manager in-process until Stop or the end of the
// test. Its logs go to the test's log.
func (e *Env) StartController(t testing.TB, opts ControllerOptions) *RunningController {
	t.Helper()
	cfg := opts.RESTConfig
	if cfg == nil {
		cfg = e.RESTConfig()
	}
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	rc := &RunningController{cancel: cancel, done: make(chan error, 1)}
	mc := manager.Config{
		RESTConfig:   cfg,
		Namespace:    opts.Namespace,
		Workers:      opts.Workers,
		ResyncPeriod: 0,
	}
	mc.Controller.ConflictRecheck = time.Second
	go func() { rc.done <- manager.Run(ctx, mc) }()
	t.Cleanup(func() {
		if err := rc.Stop(); err != nil {
			t.Errorf("controller exited with error: %v", err)
		}
	})
	return rc
}

// Stop cancels the controller and waits until it has drained and returned.
// It is safe to call more than once.
func (rc *RunningController) Stop() error {
	rc.cancel()
	err, ok := <-rc.done
	if ok {
		close(rc.done)
	}
	return err
}
