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

package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/webhook"
)

// serveWebhookOnSwitch starts the conversion webhook when the Book CRD
// switches to converting through this replica's: `kubectl apply -f
// manifests/crd.yaml` over replicas started under a CRD that converted
// nothing, or through another webhook. From
// that moment the API server sends every v1 read of a v2-stored Book here,
// the informers' included, so waiting for a restart would leave them
// failing. It watches the one CRD (RBAC: list and watch by resourceName).
// Run is past its steps when the switch comes, so a failure to start
// cannot end it: /readyz fails with the error instead.
func (m *manager) serveWebhookOnSwitch(ctx context.Context, crds apiextensionsclient.Interface, cfg *rest.Config) error {
	late := &lateWebhook{config: m.cfg.Webhook}
	m.lateWebhook = late
	m.readyChecks = append(m.readyChecks, late.ready)
	m.onStop(late.stop)
	watchCtx, stopWatch := context.WithCancel(ctx)
	m.onStop(stopWatch)
	switched, err := watchForWebhookCRD(watchCtx, crds, m.cfg.Webhook)
	if err != nil {
		stopWatch()
		return err
	}
	go func() {
		select {
		case <-watchCtx.Done():
			return
		case <-switched:
		}
		stopWatch()
		late.starting()
		klog.FromContext(ctx).Info("The CRD now converts through a webhook; starting it", "crd", webhook.DefaultCRDName)
		srv, stop, err := m.startWebhook(ctx, crds, cfg)
		if err != nil && !errors.Is(err, errStopped) {
			klog.FromContext(ctx).Error(err, "Conversion webhook did not start", "crd", webhook.DefaultCRDName)
		}
		late.started(srv, stop, err)
	}()
	return nil
}

// watchForWebhookCRD returns a channel closed once the Book CRD converts
// through wc's webhook; the watch ends with ctx.
func watchForWebhookCRD(ctx context.Context, crds apiextensionsclient.Interface, wc Webhook) (<-chan struct{}, error) {
	factory := apiextensionsinformers.NewSharedInformerFactoryWithOptions(crds, 0,
		apiextensionsinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", webhook.DefaultCRDName).String()
		}))
	informer := factory.Apiextensions().V1().CustomResourceDefinitions().Informer()
	switched := make(chan struct{})
	var once sync.Once
	seen := func(obj any) {
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && wc.converts(crd) {
			once.Do(func() { close(switched) })
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }})
	if err != nil {
		return nil, fmt.Errorf("watching the CRD %s: %w", webhook.DefaultCRDName, err)
	}
	factory.Start(ctx.Done())
	return switched, nil
}

// lateWebhook is the state of a webhook started on the CRD's switch, which
// /readyz and the manager's stop read from other goroutines.
type lateWebhook struct {
	// config is the webhook's configuration, which says whose a CRD's
	// webhook is (Webhook.converts).
	config Webhook

	mu sync.Mutex
	// switched: the CRD converts through the webhook; done: the start
	// ended, serving srv (stopped with stopFn) or failing with err.
	switched, done bool
	srv            *webhook.Server
	stopFn         func()
	err            error
	// stopped: Run has ended; a webhook that starts after it is stopped
	// at once.
	stopped bool
}

func (l *lateWebhook) starting() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.switched = true
}

func (l *lateWebhook) started(srv *webhook.Server, stop func(), err error) {
	l.mu.Lock()
	l.done, l.srv, l.stopFn, l.err = true, srv, stop, err
	stopped := l.stopped
	l.mu.Unlock()
	if stopped && stop != nil {
		stop()
	}
}

// serving is nil once the webhook serves with a certificate, else why not.
func (l *lateWebhook) serving() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.done:
		return errors.New("conversion webhook starting: the CRD switched to it")
	case l.err != nil:
		return fmt.Errorf("conversion webhook did not start after the CRD switched to it: %w", l.err)
	}
	return l.srv.Ready()
}

// ready is /readyz's view: nil while the CRD converts nothing, then
// serving's.
func (l *lateWebhook) ready() error {
	l.mu.Lock()
	switched := l.switched
	l.mu.Unlock()
	if !switched {
		return nil
	}
	return l.serving()
}

// holdMigration keeps the storage migration (pkg/migration) from starting
// while crd converts through this webhook and it is not serving yet: its
// rewrites would fail, and the CA it writes into crd, a new generation,
// would start a second migration. The migrator may see the switch before
// the watch here does, so it asks the CRD it holds. Nil l holds nothing.
func (l *lateWebhook) holdMigration(crd *apiextensionsv1.CustomResourceDefinition) error {
	if l == nil || !l.config.converts(crd) {
		return nil
	}
	return l.serving()
}

// stop stops the webhook if it started, and one still starting once it has.
func (l *lateWebhook) stop() {
	l.mu.Lock()
	stop := l.stopFn
	l.stopped = true
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}
