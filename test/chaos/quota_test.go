//go:build chaos && linux

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

package chaos_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// configMapCount is the ResourceQuota resource that counts ConfigMaps.
const configMapCount corev1.ResourceName = "count/configmaps"

// TestQuotaFull (issue 27, item 5): ten Books are Ready; then a
// ResourceQuota on count/configmaps exactly as large as the namespace's
// ConfigMaps (kube-root-ca.crt included) fills the namespace. New Books must
// say Ready=False ConfigMapQuotaExceeded naming the quota, with one Warning
// event each, and their creates, counted in the audit log over a fixed
// window, stay within the backoff's bound; edits of the Ready Books still
// land, since an update does not count against the quota. Once the quota
// is raised every Book converges by itself.
func TestQuotaFull(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	waitRootCA(t, ns)
	addr := startRefusalController(t, ns)
	early := createBooks(t, ns, "early", 10)
	waitConverged(t, ns, expectation{want: early})

	list, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := len(list.Items)
	quotas := env.Kube.CoreV1().ResourceQuotas(ns)
	const name = "chaos-configmaps"
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{configMapCount: *resource.NewQuantity(int64(full), resource.DecimalSI)}},
	}
	if _, err := quotas.Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	faults.Add(1)
	// The resource-quota controller computes the usage; until then the
	// quota admission plugin refuses every create for another reason.
	waitQuotaUsed(t, ns, name, full)
	probeUntil(t, ns, "quota-probe", "the full quota to refuse a dry run", isRefusal("exceeded quota: "+name))

	post403 := restRequests(t, addr, "POST", "403")
	start := time.Now()
	late := createBooks(t, ns, "late", 12)
	lateNames := sortedNames(late)
	edits := updateSpecs(t, ns, sortedNames(early)[:3], func(name string, old webappv2.BookSpec) spec {
		return spec{title: "Edited under a full quota: " + name, price: old.Price.WholeUnits() + 100}
	})
	ready := union(early, edits)
	waitRefused(t, ns, ready, refusedAll(lateNames, controller.ReasonConfigMapQuotaExceeded, name))
	time.Sleep(time.Until(start.Add(refusalWindow)))

	creates, codes := configMapAttempts(controllerWrites(t, ns), ns, "create", lateNames, start, refusalWindow)
	nCreates, most := expectBoundedRetries(t, "creates over the quota", lateNames, creates, codes, refusalWindow)
	nWarnings := expectOneWarning(t, ns, lateNames, controller.ReasonConfigMapQuotaExceeded)
	metric403 := restRequests(t, addr, "POST", "403") - post403

	raised := full + len(late) + 5
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := quotas.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.Hard[configMapCount] = *resource.NewQuantity(int64(raised), resource.DecimalSI)
		_, err = quotas.Update(ctx, q, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	converged := waitConverged(t, ns, expectation{want: union(ready, late)})
	if converged > 2*refusalRecheck {
		t.Errorf("converged %v after the quota was raised, want within %v (the retry interval is capped at %v)",
			converged.Round(time.Millisecond), 2*refusalRecheck, refusalRecheck)
	}
	expectOneWarning(t, ns, lateNames, controller.ReasonConfigMapQuotaExceeded)
	waitQuotaUsed(t, ns, name, full+len(late))
	figure(t, "count/configmaps quota full at %d (kube-root-ca.crt and 10 Ready Books), %d new Books, 3 edits landing: in %v, "+
		"%d create attempts (at most %d per Book, bound %d) answered %v; metrics: %v POSTs answered 403; %d Warnings; "+
		"converged %v after the quota was raised to %d",
		full, len(late), refusalWindow, nCreates, most, maxAttempts(refusalWindow), codes, metric403, nWarnings,
		converged.Round(10*time.Millisecond), raised)
}

// waitQuotaUsed waits until the quota's status shows used ConfigMaps.
func waitQuotaUsed(t *testing.T, ns, name string, used int) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("quota %s to count %d ConfigMaps", name, used), func(ctx context.Context) error {
		q, err := env.Kube.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, ok := q.Status.Used[configMapCount]
		hard, hasHard := q.Status.Hard[configMapCount]
		return poll.Done(ok && hasHard && hard.Equal(q.Spec.Hard[configMapCount]) && got.String() == strconv.Itoa(used),
			"status: hard %v, used %v", q.Status.Hard, q.Status.Used)
	})
}
