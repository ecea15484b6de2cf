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
	"fmt"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/leader"
	"ydzs.io/book-controller/pkg/migration"
)

// bookCRD is the CRD whose storedVersions --storage-migration keeps down
// to its storage version.
const bookCRD = "books." + webappv2.GroupName

// buildMigrator builds the storage migration loop of --storage-migration
// (pkg/migration), writing through w: behind the fence, with leader
// election. Nil when off. Not with shards: it runs beside the one
// unsharded controller, while this process leads.
func (m *manager) buildMigrator(ctx context.Context, w *writers) (*migration.Migrator, error) {
	if !m.cfg.StorageMigration {
		return nil, nil
	}
	ext, err := apiextensionsclient.NewForConfig(w.config)
	if err != nil {
		return nil, fmt.Errorf("creating apiextensions client: %w", err)
	}
	// Its Events outlive ctx as the controller's do.
	eventCtx, stopEvents := context.WithCancel(context.WithoutCancel(ctx))
	m.onStop(stopEvents)
	recorder, err := newEventRecorder(eventCtx, w.kube, m.eventLimiter)
	if err != nil {
		return nil, err
	}
	return migration.New(migration.Config{CRDName: bookCRD, Extensions: ext, Kube: w.kube, Recorder: recorder,
		Metrics: migration.NewMetrics(m.metrics.registry), ManagedBy: DefaultUserAgent, Clock: m.clock,
		Hold: m.lateWebhook.holdMigration})
}

// migrating is the work of a process with --storage-migration: the
// controller, and the migrator beside it for as long as the controller
// runs.
type migrating struct {
	leader.Work
	migrator *migration.Migrator
}

// Run runs the migrator until the controller's Run returns.
func (w *migrating) Run(ctx context.Context) error {
	migrateCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.migrator.Run(migrateCtx) // it logs and retries its errors itself
	}()
	err := w.Work.Run(ctx)
	stop()
	<-done
	return err
}
