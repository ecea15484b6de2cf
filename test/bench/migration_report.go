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
	"fmt"
	"strings"

	"ydzs.io/book-controller/pkg/localcluster"
)

func migrationMarkdown(r *MigrationResult) string {
	var b strings.Builder
	b.WriteString("# The storage migration: Books stored as v1 rewritten as v2\n\n")
	fmt.Fprintf(&b, "    make bench-migration MIG_N=%d\n    cd test/bench && %s\n\n", r.N, r.Command)
	fmt.Fprintf(&b, "Measured %s on %d cores (%s), %s of memory, load average %s at the start; %s. ",
		r.Started, r.Machine.Cores, r.Machine.CPU, mib(r.Machine.MemoryBytes), r.Machine.LoadAvgStart, r.Cluster)
	fmt.Fprintf(&b, "%d Books were created through v1 under the CRD of the releases before v2 (framework.V1OnlyCRD: v1 alone, stored as v1) over %d namespaces, %d at once, in %.1f s (%s Books/s). "+
		"Then the CRD got manifests/crd.yaml's spec (v2 stored, v1 converted by the webhook): storedVersions %v. "+
		"kube-controller-manager was restarted, so that its garbage collector, whose caches the storage version migrator rewrites from, "+
		"watched Books as served now rather than finding them at its next discovery (every 30 s). "+
		"Then this build's controller started as an upgrade starts it: the conversion webhook on a free port of 127.0.0.1 (`--webhook-loopback`), "+
		"`--leader-elect`, `--storage-migration` at its default (on), confined with `--namespace` to a namespace without Books, so that its work is the webhook's and the migrator's. "+
		"Load average %s at its start, %s at the end.\n\n",
		r.N, r.Namespaces, r.CreateC, r.CreateSeconds, perSecondCell(float64(r.N), r.CreateSeconds), r.StoredBefore, r.LoadAvg[0], r.LoadAvg[1])

	b.WriteString("## Times\n\n| | seconds |\n|---|--:|\n")
	fmt.Fprintf(&b, "| creating the %d Books through v1 | %.1f |\n", r.N, r.CreateSeconds)
	fmt.Fprintf(&b, "| **the controller's start → storedVersions [v2]** | **%.1f** |\n", r.FromControllerSeconds)
	s := r.SVM
	created := "–"
	if s.Name != "" {
		// Its creationTimestamp is whole seconds: up to a second early.
		created = fmt.Sprintf("%.1f", s.CreatedAfterControllerSeconds)
	}
	fmt.Fprintf(&b, "| the controller's start → the StorageVersionMigration's creationTimestamp | %s |\n", created)
	fmt.Fprintf(&b, "| its creationTimestamp → its Succeeded condition's lastTransitionTime | %s |\n", secondsCell(s.SucceededAfterCreatedSeconds))
	fmt.Fprintf(&b, "| **its creationTimestamp → storedVersions [v2]** | **%s** |\n", secondsCell(s.StoredV2AfterCreatedSeconds))
	if s.SucceededAfterCreatedSeconds > 0 {
		fmt.Fprintf(&b, "\nThe migration rewrote %s Books/s (N ÷ creation to Succeeded). ", perSecondCell(float64(r.N), s.SucceededAfterCreatedSeconds))
	} else {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Migration %s; conditions at the end: %s.\n\n", s.Name, strings.Join(s.Conditions, ", "))

	b.WriteString("## The webhook\n\n| | the controller's start → the migration seen | the migration seen → storedVersions [v2] |\n|---|--:|--:|\n")
	bf, du := r.BeforeSVM, r.DuringSVM
	fmt.Fprintf(&b, "| ConversionReviews (the histogram's count) | %g | %g |\n", bf.Reviews, du.Reviews)
	fmt.Fprintf(&b, "| reviews per Book | %s | %s |\n", ratioCell(bf.Reviews, float64(r.N)), ratioCell(du.Reviews, float64(r.N)))
	for _, to := range []string{"v2", "v1"} {
		fmt.Fprintf(&b, "| Books converted to %s, per Book | %s | %s |\n", to, ratioCell(bf.ObjectsTo[to], float64(r.N)), ratioCell(du.ObjectsTo[to], float64(r.N)))
	}
	fmt.Fprintf(&b, "| p50 per review, interpolated in the buckets | %s | %s |\n", msOf(bf), msOf(du))
	fmt.Fprintf(&b, "| p99 per review, interpolated in the buckets | %s | %s |\n", msOf(bf, "p99"), msOf(du, "p99"))
	fmt.Fprintf(&b, "| mean per review (the histogram's sum ÷ count) | %s | %s |\n", msOf(bf, "mean"), msOf(du, "mean"))
	fmt.Fprintf(&b, "| by result | %s | %s |\n\n", resultsCell(bf.Results), resultsCell(du.Results))

	b.WriteString("## CPU from the controller's start to storedVersions [v2]\n\n| controller | kube-apiserver | etcd | kube-controller-manager | bench |\n|--:|--:|--:|--:|--:|\n")
	c := r.CPUSeconds
	fmt.Fprintf(&b, "| %.1f s | %.1f s | %.1f s | %.1f s | %.1f s |\n\n", c["controller"], c[localcluster.KubeAPIServer], c[localcluster.Etcd], c[localcluster.KubeControllerManager], c["bench"])

	b.WriteString("## Checks\n\n")
	if l := r.V2List; l != nil {
		fmt.Fprintf(&b, "After the migration a paged v2 list (pages of 500) returned %d Books in %d pages, %.1f s.\n\n", l.Items, l.Pages, l.Seconds)
	}
	for _, ck := range r.Checks {
		fmt.Fprintf(&b, "- %s\n", ck)
	}
	b.WriteString(migrationMeaning)
	b.WriteString(showedSection(r.Showed))
	return b.String()
}

// migrationMeaning explains the report's figures.
const migrationMeaning = `
## What each figure means

- **The controller's start → storedVersions [v2]** is wall time from starting the
  controller's process to the bench reading the CRD's status.storedVersions as [v2]
  (polled every 250 ms): the webhook's certificate and caBundle, the Lease, the migrator
  creating its StorageVersionMigration, kube-controller-manager's storage version migrator
  rewriting every Book, and the controller setting storedVersions once it Succeeded.
- **From the migration's creation** uses the API server's own timestamps:
  creationTimestamp and the conditions' lastTransitionTime are whole seconds, so these
  figures are good to a second. kube-controller-manager's migrator starts once its garbage
  collector monitors Books and has seen the migration's resourceVersion, and checks again
  after a delay that doubles (kubernetes/pkg/controller/storageversionmigrator): part of
  the time is that waiting, not rewriting.
- **Reviews**: the API server keeps a watch cache per served version of a custom
  resource. Once the webhook answers, the v2 cache converts every Book still stored as v1
  (reviews before the migration shows), and each Book the migration rewrites as v2 is then
  converted back for the v1 cache; the rewrite itself reads v1 and writes v2. Counts and
  times come from book_controller_conversion_review_duration_seconds and
  book_controller_conversion_reviews_total, scraped when the bench first saw the migration
  and at the end; p50 and p99 are only as fine as the histogram's buckets. The Books
  converted to each version come from book_controller_conversion_objects_total: to v2 are
  reads of Books still stored as v1, to v1 are Books written as v2 and read, watched or
  tracked (managedFields of v1 writers) as v1.
- **CPU** is each process's user + system time (/proc/<pid>/stat) over the same span; the
  controller's from its start.
- **Checks**: storedVersions is [v2] alone, the migration Succeeded, a v2 list returns
  every Book created (none lost), and no review was answered with anything but success.
`

// secondsCell formats seconds, "–" for what was not measured (negative).
func secondsCell(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

// perSecondCell is n ÷ seconds, "–" for no time.
func perSecondCell(n, seconds float64) string {
	if seconds <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", n/seconds)
}
