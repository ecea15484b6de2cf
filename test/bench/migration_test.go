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

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSVMTimes(t *testing.T) {
	created := time.Date(2026, 12, 6, 5, 0, 10, 0, time.UTC)
	start := created.Add(-2500 * time.Millisecond)
	s := &svmv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "books.webapp.ydzs.io-v2-g2", CreationTimestamp: metav1.NewTime(created)},
		Status: svmv1.StorageVersionMigrationStatus{Conditions: []metav1.Condition{
			{Type: string(svmv1.MigrationRunning), Status: metav1.ConditionFalse, Reason: "Done", LastTransitionTime: metav1.NewTime(created.Add(40 * time.Second))},
			{Type: string(svmv1.MigrationSucceeded), Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.NewTime(created.Add(41 * time.Second))},
		}},
	}
	got := svmTimes(s, start, created.Add(41500*time.Millisecond))
	if got.Name != s.Name || got.CreatedAfterControllerSeconds != 2.5 ||
		got.SucceededAfterCreatedSeconds != 41 || got.StoredV2AfterCreatedSeconds != 41.5 {
		t.Errorf("svmTimes: %+v", got)
	}
	if want := "Running=False (Done), Succeeded=True (Done)"; strings.Join(got.Conditions, ", ") != want {
		t.Errorf("conditions %q, want %q", got.Conditions, want)
	}
	// Succeeded not true (a failure): not a success time.
	s.Status.Conditions[1].Status = metav1.ConditionFalse
	if got := svmTimes(s, start, created); got.SucceededAfterCreatedSeconds != -1 {
		t.Errorf("Succeeded=False gave %g, want -1", got.SucceededAfterCreatedSeconds)
	}
	if got := svmTimes(nil, start, created); got.Name != "" || got.SucceededAfterCreatedSeconds != -1 || got.StoredV2AfterCreatedSeconds != -1 {
		t.Errorf("no migration: %+v", got)
	}
}

func migrationFixture() *MigrationResult {
	return &MigrationResult{modeRun: modeRun{Started: "2026-12-06T05:00:00Z", Command: "go run . -migration -n 1000", N: 1000, Namespaces: 4,
		Machine: Machine{Cores: 2, CPU: "test CPU", LoadAvgStart: "0.1 0.2 0.3"}, Cluster: "local"},
		CreateC: 64, CreateSeconds: 4, StoredBefore: []string{"v1", "v2"}, StoredAfter: []string{"v2"},
		FromControllerSeconds: 52.25, PollSeconds: 0.25,
		SVM: SVMTimes{Name: "books.webapp.ydzs.io-v2-g2", CreatedAfterControllerSeconds: -0.4,
			SucceededAfterCreatedSeconds: 40, StoredV2AfterCreatedSeconds: 40.4, Conditions: []string{"Succeeded=True (Done)"}},
		BeforeSVM: WebhookStats{Reviews: 1000, Results: map[string]float64{"success": 1000}},
		DuringSVM: WebhookStats{Reviews: 2000, P50Ms: 0.2, P99Ms: 1.5, MeanMs: 0.3, Results: map[string]float64{"success": 2000},
			ObjectsTo: map[string]float64{"v1": 1500, "v2": 500}},
		CPUSeconds: map[string]float64{"controller": 3, "kube-apiserver": 20},
		V2List:     &ListRun{Version: "v2", Items: 1000, Pages: 2, Seconds: 0.5}}
}

func TestMigrationChecks(t *testing.T) {
	r := migrationFixture()
	for _, c := range migrationChecks(r) {
		if !strings.HasPrefix(c, "PASS") {
			t.Errorf("a clean run: %q", c)
		}
	}
	r.StoredAfter = []string{"v1", "v2"}
	r.SVM.SucceededAfterCreatedSeconds = -1
	r.V2List.Items = 998
	r.FailuresTotal = 3
	c := migrationChecks(r)
	for _, ck := range c {
		if !strings.HasPrefix(ck, "FAIL") {
			t.Errorf("every check must fail: %q", ck)
		}
	}
	if !strings.Contains(c[2], "998 Books of 1000 created: 2 lost") {
		t.Errorf("lost Books: %q", c[2])
	}
	r.V2List = nil // the list failed
	if c := migrationChecks(r); !strings.Contains(c[2], "1000 lost") {
		t.Errorf("no list: %q", c[2])
	}
}

func TestMigrationReport(t *testing.T) {
	r := migrationFixture()
	r.Checks = migrationChecks(r)
	md := migrationMarkdown(r)
	for _, want := range []string{
		"    make bench-migration MIG_N=1000\n    cd test/bench && go run . -migration -n 1000\n",
		"in 4.0 s (250 Books/s)",
		"| **the controller's start → storedVersions [v2]** | **52.2** |",
		"| the controller's start → the StorageVersionMigration's creationTimestamp | -0.4 |",
		"| its creationTimestamp → its Succeeded condition's lastTransitionTime | 40.0 |",
		"| **its creationTimestamp → storedVersions [v2]** | **40.4** |",
		"rewrote 25 Books/s",
		"| ConversionReviews (the histogram's count) | 1000 | 2000 |",
		"| Books converted to v2, per Book | 0.00 | 0.50 |",
		"| Books converted to v1, per Book | 0.00 | 1.50 |",
		"| p50 per review, interpolated in the buckets | 0.00 ms | 0.20 ms |",
		"| 3.0 s | 20.0 s | 0.0 s | 0.0 s | 0.0 s |",
		"- PASS: a v2 list returns 1000 Books of 1000 created: 0 lost",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if secondsCell(-1) != "–" || perSecondCell(10, 0) != "–" {
		t.Errorf("cells of what was not measured: %q, %q", secondsCell(-1), perSecondCell(10, 0))
	}
}

// The report of a saved run is written again from its JSON.
func TestMigrationRereport(t *testing.T) {
	r := migrationFixture()
	r.Showed = []string{"a note written after the run"}
	first := t.TempDir()
	if err := writeMigration(options{out: first, label: defaultLabel}, r); err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	if err := rereportMigration(options{out: again, label: "x", report: filepath.Join(first, "migration.json")}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(again, "migration-x.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := migrationMarkdown(r); string(md) != want || !strings.HasSuffix(want, "- a note written after the run\n") {
		t.Errorf("report written again:\n%s\nwant:\n%s", md, want)
	}
	if err := rereportMigration(options{out: again, report: filepath.Join(first, "missing.json")}); err == nil {
		t.Error("a missing JSON: no error")
	}
}
