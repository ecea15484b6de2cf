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

// Package migration keeps a CRD's status.storedVersions down to its storage
// version: when it lists another version, objects may still be stored in
// etcd in that version, and the version can never be removed from the CRD
// (the API server refuses to drop a version storedVersions lists). The
// Migrator asks kube-controller-manager's storage version migrator to
// rewrite every object (a storagemigration.k8s.io/v1
// StorageVersionMigration), and once that has succeeded for the current
// storage version, sets storedVersions to it alone.
//
// It is generic over the CRD: the controller passes books.webapp.ydzs.io.
// It must run in one process at a time (the leader): two would race to
// create and delete the same StorageVersionMigration.
package migration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apiextensionsv1informers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	svmv1informers "k8s.io/client-go/informers/storagemigration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Labels and annotations on the StorageVersionMigrations this package
// creates.
const (
	// ManagedByLabel marks them ours (and is what our SVM informer lists).
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// CRDUIDAnnotation is the UID of the CRD the migration was created
	// for: a CRD deleted and created again starts at generation 1 again,
	// and must not trust an old migration of the same name.
	CRDUIDAnnotation = "storage-migration.ydzs.io/crd-uid"
	// StoredVersionsAnnotation is the CRD's storedVersions when the
	// migration was created, comma-separated: what a failed migration
	// restores (kube-controller-manager 1.37 sets storedVersions to the
	// storage version when a migration ends, failed or not).
	StoredVersionsAnnotation = "storage-migration.ydzs.io/stored-versions"
)

// Event reasons, on the CRD.
const (
	EventMigrationStarted   = "StorageMigrationStarted"
	EventMigrationSucceeded = "StorageMigrationSucceeded"
	EventMigrationFailed    = "StorageMigrationFailed"
	EventStoredVersions     = "StoredVersionsUpdated"
	EventStoredRestored     = "StoredVersionsRestored"
)

// holdRecheck is how often a held migration (Config.Hold) asks again.
const holdRecheck = time.Second

// Defaults of Config.
const (
	DefaultFirstRetry = time.Minute
	DefaultMaxRetry   = 30 * time.Minute
)

// Config is what a Migrator needs; clients and clock are passed in.
type Config struct {
	// CRDName is the CRD's name, <plural>.<group>.
	CRDName string
	// Extensions reads the CRD and updates its status.
	Extensions apiextensionsclient.Interface
	// Kube creates, reads and deletes StorageVersionMigrations.
	Kube kubernetes.Interface
	// Recorder sends the Events, regarding the CRD; its scheme must know
	// apiextensions.k8s.io/v1.
	Recorder events.EventRecorder
	// Metrics are counted in; nil counts nowhere.
	Metrics *Metrics
	// ManagedBy is the value of ManagedByLabel on our migrations.
	ManagedBy string
	// Clock times the retries; nil is the real clock.
	Clock clock.Clock
	// FirstRetry is how long after a failed migration a new one is
	// started, if nothing changed the CRD meanwhile; each further failure
	// doubles it, up to MaxRetry. Zero picks the defaults.
	FirstRetry, MaxRetry time.Duration
	// Hold, when set and returning an error for the CRD as cached, keeps
	// a migration from starting, and is asked again a second later: the
	// controller holds one while its conversion webhook, without which
	// every rewrite would fail, starts after the CRD switched to it.
	Hold func(*apiextensionsv1.CustomResourceDefinition) error
}

// Migrator is one CRD's storage migration loop. Run it while leading.
type Migrator struct {
	cfg Config
	gr  metav1.GroupResource
	// reported holds the migrations whose outcome was already logged,
	// counted and sent as an Event (by UID), so that each is
	// reported once per process.
	reported map[types.UID]bool
	// failures counts the failed attempts in a row for the current
	// migration name, for the backoff; reset by a success or a new name.
	failures     int
	failuresName string
}

// New checks cfg and returns a Migrator.
func New(cfg Config) (*Migrator, error) {
	resource, group, ok := strings.Cut(cfg.CRDName, ".")
	if !ok || resource == "" || group == "" {
		return nil, fmt.Errorf("migration: CRD name %q is not <plural>.<group>", cfg.CRDName)
	}
	if cfg.Extensions == nil || cfg.Kube == nil || cfg.Recorder == nil {
		return nil, errors.New("migration: Extensions, Kube and Recorder are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.FirstRetry <= 0 {
		cfg.FirstRetry = DefaultFirstRetry
	}
	if cfg.MaxRetry < cfg.FirstRetry {
		cfg.MaxRetry = max(DefaultMaxRetry, cfg.FirstRetry)
	}
	if cfg.ManagedBy == "" {
		cfg.ManagedBy = "book-controller"
	}
	return &Migrator{cfg: cfg, gr: metav1.GroupResource{Group: group, Resource: resource}, reported: map[types.UID]bool{}}, nil
}

// Name is the StorageVersionMigration for a CRD's state: its name, the
// storage version and the generation at which that was the storage version.
// A migration of that name that succeeded was therefore created, and ran,
// after the storage version was the current one (the generation changes
// with any change of the spec, the storage version's included).
func Name(crdName, storage string, generation int64) string {
	return fmt.Sprintf("%s-%s-g%d", crdName, storage, generation)
}

// StorageVersion is the version of crd marked storage ("" if none).
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// Run watches the CRD and our migrations and acts on each change, until ctx
// ends. Errors of the API are logged and retried with backoff.
func (m *Migrator) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("crd", m.cfg.CRDName)
	ctx = klog.NewContext(ctx, logger)
	// Kubernetes before 1.37 does not serve the v1 API by default (nor run
	// its migrator): say so once rather than fail a watch forever.
	if _, err := m.cfg.Kube.Discovery().ServerResourcesForGroupVersion(svmv1.SchemeGroupVersion.String()); apierrors.IsNotFound(err) {
		logger.Info("Storage migration off: the API server does not serve " + svmv1.SchemeGroupVersion.String())
		return nil
	}
	kick := make(chan struct{}, 1)
	crds, svms, stop, err := m.watch(ctx, kick)
	if err != nil {
		return err
	}
	defer stop()
	if !cache.WaitForCacheSync(ctx.Done(), crds.Informer().HasSynced, svms.Informer().HasSynced) {
		return nil
	}
	logger.Info("Storage migration started")
	errDelay := time.Duration(0)
	for {
		wait, err := m.sync(ctx, crds.Lister().Get, svms.Lister().Get)
		switch {
		case err != nil && ctx.Err() == nil:
			errDelay = min(max(2*errDelay, time.Second), time.Minute)
			logger.Error(err, "Storage migration: will retry", "after", errDelay)
			wait = errDelay
		case err == nil:
			errDelay = 0
		}
		if !m.await(ctx, kick, wait) {
			return nil
		}
	}
}

// await waits for a kick, or wait if not 0; false when ctx ended.
func (m *Migrator) await(ctx context.Context, kick <-chan struct{}, wait time.Duration) bool {
	var fired <-chan time.Time
	if wait > 0 {
		timer := m.cfg.Clock.NewTimer(wait)
		defer timer.Stop()
		fired = timer.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-kick:
	case <-fired:
	}
	return ctx.Err() == nil
}

// watch starts the informers of the CRD (by name) and of our migrations (by
// label), which kick on every change; stop stops them and waits.
func (m *Migrator) watch(ctx context.Context, kick chan struct{}) (crds apiextensionsv1informers.CustomResourceDefinitionInformer,
	svms svmv1informers.StorageVersionMigrationInformer, stop func(), err error) {
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(kick) },
		UpdateFunc: func(any, any) { poke(kick) },
		DeleteFunc: func(any) { poke(kick) },
	}
	crdFactory := apiextensionsinformers.NewSharedInformerFactoryWithOptions(m.cfg.Extensions, 0,
		apiextensionsinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", m.cfg.CRDName).String()
		}))
	svmFactory := kubeinformers.NewSharedInformerFactoryWithOptions(m.cfg.Kube, 0,
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{ManagedByLabel: m.cfg.ManagedBy}.String()
		}))
	crds = crdFactory.Apiextensions().V1().CustomResourceDefinitions()
	svms = svmFactory.Storagemigration().V1().StorageVersionMigrations()
	if _, err := crds.Informer().AddEventHandler(handler); err != nil {
		return nil, nil, nil, err
	}
	if _, err := svms.Informer().AddEventHandler(handler); err != nil {
		return nil, nil, nil, err
	}
	informerCtx, cancel := context.WithCancel(ctx)
	crdFactory.Start(informerCtx.Done())
	svmFactory.Start(informerCtx.Done())
	return crds, svms, func() {
		cancel()
		crdFactory.Shutdown()
		svmFactory.Shutdown()
	}, nil
}

// held reports whether Config.Hold keeps a migration of crd from starting.
func (m *Migrator) held(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) bool {
	if m.cfg.Hold == nil {
		return false
	}
	err := m.cfg.Hold(crd)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Storage migration held", "crd", crd.Name, "reason", err)
	}
	return err != nil
}

// ours is the migration name made for crd, or nil: none, or another
// CRD's of the same name (deleted and created again since).
func ours(crd *apiextensionsv1.CustomResourceDefinition, name string,
	getSVM func(string) (*svmv1.StorageVersionMigration, error)) (*svmv1.StorageVersionMigration, error) {
	svm, err := getSVM(name)
	if apierrors.IsNotFound(err) || (err == nil && svm.Annotations[CRDUIDAnnotation] != string(crd.UID)) {
		return nil, nil
	}
	return svm, err
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sync does the next step for the CRD as cached, and returns how long to
// wait at most before the next (0: until something changes).
func (m *Migrator) sync(ctx context.Context, getCRD func(string) (*apiextensionsv1.CustomResourceDefinition, error),
	getSVM func(string) (*svmv1.StorageVersionMigration, error)) (time.Duration, error) {
	crd, err := getCRD(m.cfg.CRDName)
	if apierrors.IsNotFound(err) {
		m.cfg.Metrics.observe(0, false)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	storage := StorageVersion(crd)
	stored := crd.Status.StoredVersions
	name := Name(crd.Name, storage, crd.Generation)
	svm, err := ours(crd, name, getSVM)
	if err != nil {
		return 0, err
	}
	done := storage != "" && slices.Equal(stored, []string{storage})
	// Observed when the sync has done its writes: a test waits for it.
	defer m.cfg.Metrics.observe(len(stored), svm != nil && !terminal(svm))
	if svm != nil && failed(svm) {
		return m.failed(ctx, crd, svm)
	}
	if done {
		// Nothing to migrate. kube-controller-manager's migrator (1.37)
		// sets storedVersions itself when one of its migrations succeeds:
		// report ours once if it did.
		if svm != nil && succeeded(svm) && !m.reported[svm.UID] {
			m.report(ctx, crd, svm, nil)
		}
		return 0, nil
	}
	if storage == "" {
		return 0, fmt.Errorf("CRD %s has no storage version", crd.Name)
	}
	switch {
	case svm == nil && m.held(ctx, crd):
		return holdRecheck, nil
	case svm == nil:
		return 0, m.start(ctx, crd, name)
	case succeeded(svm):
		if !m.reported[svm.UID] {
			m.report(ctx, crd, svm, nil)
		}
		m.failures, m.failuresName = 0, ""
		return 0, m.setStoredVersions(ctx, crd.UID, name)
	}
	klog.FromContext(ctx).V(2).Info("Storage migration running", "migration", name, "storedVersions", stored, "storageVersion", storage)
	return 0, nil
}
