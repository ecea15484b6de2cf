//go:build upgrade

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

package upgrade_test

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// bothVersionsList: the Books listed as v1 (converted by the webhook, a
// page at a time, as kubectl and informers list) and as v2 (as stored)
// are the same n.
func (r *release) bothVersionsList(t *testing.T, n int) {
	t.Helper()
	var v1, v2 []string
	for cont := ""; ; {
		list, err := env.Books.WebappV1().Books(r.ns).List(t.Context(), metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			t.Fatalf("listing Books as v1: %v", err)
		}
		for _, b := range list.Items {
			v1 = append(v1, b.Name)
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	list, err := env.Books.WebappV2().Books(r.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing Books as v2: %v", err)
	}
	for _, b := range list.Items {
		v2 = append(v2, b.Name)
	}
	slices.Sort(v1)
	slices.Sort(v2)
	if len(v1) != n || !slices.Equal(v1, v2) {
		t.Errorf("%d Books listed as v1 and %d as v2, want %d in both, the same", len(v1), len(v2), n)
	}
}

// applyV1Examples: after the upgrade, `kubectl apply -f manifests/examples/`
// (v1) still creates Books, with the deprecation warning, and they become
// Ready.
func (r *release) applyV1Examples(t *testing.T) {
	examples := filepath.Join(framework.RepoRoot(), "manifests", "examples")
	files, err := filepath.Glob(filepath.Join(examples, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no v1 examples in %s: %v", examples, err)
	}
	out, err := exec.Command(env.Kubectl(t), "--kubeconfig", env.Cluster.KubeconfigPath(), "apply", "-n", r.ns, "-f", examples).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -f manifests/examples/: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "webapp.ydzs.io/v1 Book is deprecated") {
		t.Errorf("kubectl apply of v1 Books printed no deprecation warning:\n%s", out)
	}
	r.total = upgradeBooks + len(files)
	waitConverged(t, fmt.Sprintf("%d Books in %s Ready", r.total, r.ns), env.BooksReady(r.ns, r.total))
}

// rollBack returns the controller to lastV1Release while the two-version
// CRD stays, storing v2: conversion must stay available, so this build runs
// on as --webhook-only, the Deployment of its own that the rollback keeps.
// The release's controller then converges Books changed through both
// versions, and its status writes through v1 keep what only v2 can say.
func (r *release) rollBack(t *testing.T) {
	writes := watchWrites(t, r.ns)
	before := configMapData(t, r.ns)
	// With --webhook-loopback each process points the CRD at its own port,
	// so the webhook-only one starts after this build's controller has
	// stopped; in a cluster, the Service spans both.
	if err := r.newer.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := r.newer.Wait(framework.Timeout); err != nil || code != 0 {
		t.Fatalf("this build after SIGTERM: exit code %d, %v", code, err)
	}
	env.StartWebhookOnly(t, binary)
	r.old = env.StartReplica(t, r.oldBinary, lastV1Release+"-again", framework.ReplicaOptions{Namespace: r.ns, LeaseID: leaseID, Release: true})
	env.WaitForLeaseHolder(t, r.ns, leaseID, r.old)
	start := time.Now()
	// The release writes its v1 keys alone, so it drops the keys this
	// build added for the Books edited through v2.
	r.configMaps = withoutV2Keys(before)
	want := r.editThroughBothVersions(t, "rollback", 50)
	waitConverged(t, fmt.Sprintf("%d Books in %s Ready", r.total, r.ns), env.BooksReady(r.ns, r.total))
	waitConverged(t, "the edits in their ConfigMaps, written by "+lastV1Release, configMapsHold(r.ns, want))
	t.Logf("after the rollback, %s converged the edits in %v", lastV1Release, time.Since(start).Round(time.Millisecond))
	writes.expect(t, before, want)
	r.expectV2FieldsKept(t)
}

// withoutV2Keys is a copy of data without the keys that only this build
// writes, what the release's controller writes instead.
func withoutV2Keys(data map[string]map[string]string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for name, d := range data {
		d = maps.Clone(d)
		delete(d, controller.AmountKey)
		delete(d, controller.CurrencyKey)
		delete(d, controller.AuthorsKey)
		out[name] = d
	}
	return out
}

// expectV2FieldsKept: every Book edited through v2, during the upgrade or
// the rollback, still has its EUR price and its author, although the
// release's controller read and wrote it as v1 only.
func (r *release) expectV2FieldsKept(t *testing.T) {
	t.Helper()
	list, err := env.Books.WebappV2().Books(r.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, b := range list.Items {
		want, edited := r.v2Prices[b.Name]
		if !edited {
			continue
		}
		if b.Spec.Price != want || !slices.Equal(b.Spec.Authors, []string{v2Author}) {
			lost++
			if lost <= 5 {
				t.Errorf("%s lost what v2 said: price %+v and authors %q, want %+v and [%s]", b.Name, b.Spec.Price, b.Spec.Authors, want, v2Author)
			}
		}
	}
	t.Logf("%d Books edited through v2: %d lost a v2 field", len(r.v2Prices), lost)
}
