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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	svmv1informers "k8s.io/client-go/informers/storagemigration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
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

// start creates the migration name for crd, unless another migration of the
// resource is running: kube-controller-manager runs one at a time anyway,
// and ours would only queue behind it.
func (m *Migrator) start(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, name string) error {
	logger := klog.FromContext(ctx)
	list, err := m.cfg.Kube.StoragemigrationV1().StorageVersionMigrations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.Spec.Resource == m.gr && !terminal(other) && other.Name != name {
			logger.Info("Storage migration: waiting for another migration of the resource", "migration", other.Name)
			return nil
		}
	}
	svm := &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{ManagedByLabel: m.cfg.ManagedBy},
			Annotations: map[string]string{CRDUIDAnnotation: string(crd.UID),
				StoredVersionsAnnotation: strings.Join(crd.Status.StoredVersions, ",")}},
		Spec: svmv1.StorageVersionMigrationSpec{Resource: m.gr},
	}
	_, err = m.cfg.Kube.StoragemigrationV1().StorageVersionMigrations().Create(ctx, svm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Ours, not yet in the cache; or another CRD's of the same name
		// (the UID differs), which is left to its owner.
		return nil
	}
	if err != nil {
		return err
	}
	m.cfg.Metrics.count("started")
	logger.Info("Storage migration created", "migration", name, "storedVersions", crd.Status.StoredVersions,
		"storageVersion", StorageVersion(crd))
	m.cfg.Recorder.Eventf(crd, nil, "Normal", EventMigrationStarted, "Migrate",
		"StorageVersionMigration %s started: storedVersions %v, storage version %s", name, crd.Status.StoredVersions, StorageVersion(crd))
	return nil
}

// report logs, counts and sends an Event for the outcome of svm, once.
func (m *Migrator) report(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, svm *svmv1.StorageVersionMigration, failure error) {
	m.reported[svm.UID] = true
	logger := klog.FromContext(ctx)
	if failure != nil {
		m.cfg.Metrics.count("failed")
		logger.Error(failure, "Storage migration failed; storedVersions left alone", "migration", svm.Name,
			"storedVersions", crd.Status.StoredVersions)
		m.cfg.Recorder.Eventf(crd, nil, "Warning", EventMigrationFailed, "Migrate",
			"StorageVersionMigration %s failed, storedVersions left at %v: %v", svm.Name, crd.Status.StoredVersions, failure)
		return
	}
	m.cfg.Metrics.count("succeeded")
	took := condition(svm, svmv1.MigrationSucceeded).LastTransitionTime.Sub(svm.CreationTimestamp.Time)
	logger.Info("Storage migration succeeded", "migration", svm.Name, "took", took)
	m.cfg.Recorder.Eventf(crd, nil, "Normal", EventMigrationSucceeded, "Migrate",
		"StorageVersionMigration %s succeeded: every object is stored as %s", svm.Name, StorageVersion(crd))
}

// setStoredVersions sets the CRD's storedVersions to its storage version,
// from a fresh read, if it is still the CRD (uid) at the state the
// succeeded migration name was made for; a conflict reads again.
func (m *Migrator) setStoredVersions(ctx context.Context, uid types.UID, name string) error {
	logger := klog.FromContext(ctx)
	crds := m.cfg.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, m.cfg.CRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		storage := StorageVersion(crd)
		if crd.UID != uid || Name(crd.Name, storage, crd.Generation) != name {
			// Changed since: the next sync sees the new state.
			logger.Info("Storage migration: the CRD changed since the migration; storedVersions left alone", "migration", name)
			return nil
		}
		old := crd.Status.StoredVersions
		if slices.Equal(old, []string{storage}) {
			return nil
		}
		crd = crd.DeepCopy()
		crd.Status.StoredVersions = []string{storage}
		updated, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		logger.Info("Storage migration: storedVersions updated", "from", old, "to", updated.Status.StoredVersions)
		m.cfg.Recorder.Eventf(updated, nil, "Normal", EventStoredVersions, "Migrate",
			"storedVersions %v -> %v after StorageVersionMigration %s", old, updated.Status.StoredVersions, name)
		return nil
	})
}

// failed handles a failed migration of the CRD's current state: it puts
// back any version kube-controller-manager dropped from storedVersions,
// reports the failure once, and after a backoff deletes the migration, so
// that the next sync starts a new one.
func (m *Migrator) failed(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, svm *svmv1.StorageVersionMigration) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	name := svm.Name
	if err := m.restoreStoredVersions(ctx, crd.UID, name, svm.Annotations[StoredVersionsAnnotation]); err != nil {
		return 0, err
	}
	if m.failuresName != name {
		m.failures, m.failuresName = 0, name
	}
	if !m.reported[svm.UID] {
		m.failures++
		m.report(ctx, crd, svm, errors.New(condition(svm, svmv1.MigrationFailed).Message))
	}
	// A new migration only after a backoff: the cause (an object the
	// API refuses to rewrite, a conversion that fails) usually needs a
	// person, and each attempt lists and patches every object. A new
	// generation of the CRD gets a new migration at once.
	backoff := min(m.cfg.FirstRetry<<min(m.failures-1, 20), m.cfg.MaxRetry)
	left := condition(svm, svmv1.MigrationFailed).LastTransitionTime.Add(backoff).Sub(m.cfg.Clock.Now())
	if left > 0 {
		return left, nil
	}
	logger.Info("Storage migration: deleting the failed migration to start a new one", "migration", name, "failures", m.failures)
	uid := svm.UID
	err := m.cfg.Kube.StoragemigrationV1().StorageVersionMigrations().Delete(ctx, name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil
	}
	return 0, err
}

// restoreStoredVersions adds back to storedVersions the versions of before
// (comma-separated) that it lacks, from a fresh read, if it is still the
// CRD at the state the failed migration name was made for. Objects may
// still be stored in them: a version missing from storedVersions could be
// removed from the CRD, and those objects would no longer be readable.
func (m *Migrator) restoreStoredVersions(ctx context.Context, uid types.UID, name, before string) error {
	if before == "" {
		return nil
	}
	logger := klog.FromContext(ctx)
	crds := m.cfg.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, m.cfg.CRDName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if crd.UID != uid || Name(crd.Name, StorageVersion(crd), crd.Generation) != name {
			return nil
		}
		old := crd.Status.StoredVersions
		defined := map[string]bool{}
		for _, v := range crd.Spec.Versions {
			defined[v.Name] = true
		}
		// The versions of before, in their order, then any other listed
		// now. A version no longer in the spec cannot be listed (the API
		// server refuses it), nor was removed with objects stored in it.
		var want []string
		for _, v := range append(strings.Split(before, ","), old...) {
			if defined[v] && !slices.Contains(want, v) {
				want = append(want, v)
			}
		}
		if len(want) == len(old) {
			return nil
		}
		crd = crd.DeepCopy()
		crd.Status.StoredVersions = want
		updated, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		logger.Info("Storage migration failed: storedVersions restored", "migration", name, "from", old, "to", updated.Status.StoredVersions)
		m.cfg.Recorder.Eventf(updated, nil, "Warning", EventStoredRestored, "Migrate",
			"storedVersions %v -> %v: StorageVersionMigration %s failed, objects may still be stored in the versions removed", old, updated.Status.StoredVersions, name)
		return nil
	})
}

func condition(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType) *metav1.Condition {
	c := meta.FindStatusCondition(svm.Status.Conditions, string(t))
	if c == nil {
		return &metav1.Condition{}
	}
	return c
}

func succeeded(svm *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded))
}

func failed(svm *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationFailed))
}

func terminal(svm *svmv1.StorageVersionMigration) bool { return succeeded(svm) || failed(svm) }
