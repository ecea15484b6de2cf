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

package migration

import (
	"context"
	"errors"
	"strings"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

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
