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

// Package leasetest makes client-go's fake clientset hold Leases as an API
// server does, for the unit tests of pkg/leader and pkg/shard: it refuses
// an update based on a stale read, without which a leader's renewal would
// silently overwrite a successor's Lease and no loss could be staged.
package leasetest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// NewClientset is a fake clientset whose Lease updates must carry the
// resourceVersion last stored, as the API server's optimistic concurrency
// demands.
func NewClientset() *fake.Clientset {
	kube := fake.NewClientset()
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	kube.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).ResourceVersion = "1"
		return false, nil, nil
	})
	kube.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		cur, err := kube.Tracker().Get(gvr, l.Namespace, l.Name)
		if err != nil {
			return false, nil, nil // the tracker answers NotFound itself
		}
		if rv := cur.(*coordinationv1.Lease).ResourceVersion; l.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name,
				fmt.Errorf("resourceVersion %s is not the latest, %s", l.ResourceVersion, rv))
		}
		n, _ := strconv.Atoi(l.ResourceVersion)
		l.ResourceVersion = strconv.Itoa(n + 1)
		return false, nil, nil
	})
	return kube
}

// Get reads a Lease, failing the test if it cannot.
func Get(t testing.TB, kube *fake.Clientset, namespace, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := kube.CoordinationV1().Leases(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease %s/%s: %v", namespace, name, err)
	}
	return l
}

// Take makes holder the holder of an existing Lease for duration, as a
// successor that found it expired would.
func Take(t testing.TB, kube *fake.Clientset, namespace, name, holder string, duration time.Duration) {
	t.Helper()
	l := Get(t, kube, namespace, name)
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(duration / time.Second))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := kube.CoordinationV1().Leases(namespace).Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("taking the Lease %s/%s: %v", namespace, name, err)
	}
}

// Holder is the holder of a Lease, "" if none.
func Holder(t testing.TB, kube *fake.Clientset, namespace, name string) string {
	t.Helper()
	if h := Get(t, kube, namespace, name).Spec.HolderIdentity; h != nil {
		return *h
	}
	return ""
}
