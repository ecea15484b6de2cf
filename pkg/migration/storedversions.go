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
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

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
