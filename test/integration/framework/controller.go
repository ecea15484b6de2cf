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

package framework

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/manager"
)

// ControllerOptions adjust an in-process controller. Defaults suit tests: a
// short conflict recheck so a removed foreign ConfigMap is noticed quickly.
type ControllerOptions struct {
	// Namespace restricts the controller; empty watches all namespaces.
	Namespace string
	// Workers defaults to 4.
	Workers int
	// RESTConfig overrides the controller's credentials. By default it runs
	// as its own ServiceAccount, bound by the roles in manifests/, so every
	// test also proves the roles grant enough.
	RESTConfig *rest.Config
	// LeaderElection is passed through to the manager.
	LeaderElection manager.LeaderElection
	// Shards is passed through.
	Shards int // fork:line shards
	// MetricsAddr and ProbeAddr are passed through; empty means off.
	MetricsAddr, ProbeAddr string
	// ConflictRecheck defaults to one second. A test that must show a Book
	// converging on an event, not on the recheck, sets it long.
	ConflictRecheck time.Duration
	// MetricsSecure and MetricsCertDir are passed through: HTTPS metrics
	// for authorized callers only.
	MetricsSecure  bool
	MetricsCertDir string
	// fork:begin ui
	// UIAddr is passed through: the live view (pkg/ui); empty means off.
	UIAddr string
	// fork:end ui
	// fork:begin v2
	// Webhook is passed through: the conversion webhook; zero is off.
	Webhook manager.Webhook
	// fork:end v2
	// EventQPS and EventBurst are passed through; zero EventQPS sends
	// every Event.
	EventQPS   float32
	EventBurst int
	// Off turns optimization layers off (controller.Options.Off), on top of
	// the layers the environment turns off for the whole run
	// (BOOK_DISABLE_LAYERS, LayersOff).
	Off controller.Layers
	// On names the layers this controller keeps on whatever the
	// environment says: those a test of a layer needs.
	On controller.Layers
	// Observer, if set, is told each step of each Book's way through the
	// controller (controller.Options.Observer): a test that must know a
	// Book was synced after some moment watches with it.
	Observer controller.Observer
	// fork:begin v2
	// StorageMigration is passed through (pkg/migration); off by default.
	StorageMigration bool
	// fork:end v2
}

// RunningController is a controller started by StartController.
type RunningController struct {
	cancel   context.CancelFunc
	exited   chan struct{}
	err      error
	exitedAt time.Time
}

// StartController runs the manager in-process until Stop or the end of the
// test. Its logs go to the test's log.
func (e *Env) StartController(t testing.TB, opts ControllerOptions) *RunningController {
	t.Helper()
	cfg := opts.RESTConfig
	if cfg == nil {
		cfg = e.ControllerServiceAccountConfig(t)
	}
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	rc := &RunningController{cancel: cancel, exited: make(chan struct{})}
	mc := manager.Config{
		RESTConfig:     cfg,
		Namespace:      opts.Namespace,
		Workers:        opts.Workers,
		ResyncPeriod:   0,
		LeaderElection: opts.LeaderElection,
		Shards:         opts.Shards, // fork:line shards
		MetricsAddr:    opts.MetricsAddr,
		MetricsSecure:  opts.MetricsSecure,
		MetricsCertDir: opts.MetricsCertDir,
		ProbeAddr:      opts.ProbeAddr,
		UIAddr:         opts.UIAddr,  // fork:line ui
		Webhook:        opts.Webhook, // fork:line v2
		EventQPS:       opts.EventQPS,
		EventBurst:     opts.EventBurst,
	}
	mc.Controller.Off = opts.layersOff()
	mc.Controller.Observer = opts.Observer
	mc.StorageMigration = opts.StorageMigration // fork:line v2
	mc.Controller.ConflictRecheck = opts.ConflictRecheck
	if mc.Controller.ConflictRecheck == 0 {
		mc.Controller.ConflictRecheck = time.Second
	}
	go func() {
		defer close(rc.exited)
		rc.err = manager.Run(ctx, mc)
		rc.exitedAt = time.Now()
	}()
	t.Cleanup(func() {
		if err := rc.Stop(); err != nil && !errors.Is(err, manager.ErrLeaderElectionLost) {
			t.Errorf("controller exited with error: %v", err)
		}
	})
	return rc
}

// Exited is closed when the controller's Run has returned.
func (rc *RunningController) Exited() <-chan struct{} { return rc.exited }

// ExitedAt is when Run returned; valid after Exited is closed.
func (rc *RunningController) ExitedAt() time.Time { return rc.exitedAt }

// Err is what Run returned; valid after Exited is closed.
func (rc *RunningController) Err() error { return rc.err }

// Stop cancels the controller and waits until it has drained and returned,
// and returns Run's error. It is safe to call more than once.
func (rc *RunningController) Stop() error {
	rc.cancel()
	<-rc.exited
	return rc.err
}
