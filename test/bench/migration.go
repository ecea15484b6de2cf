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
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/pkg/webhook"
	"ydzs.io/book-controller/test/integration/framework"
)

// The storage migration's time (-migration, `make bench-migration`; issue
// 38): N Books created through v1 under the CRD of the releases before v2
// (framework.V1OnlyCRD: v1 alone, stored as v1), the CRD switched to
// manifests/crd.yaml (v2 stored,
// storedVersions [v1 v2]), then this build's controller started with its
// webhook on 127.0.0.1 and leader election, as an upgrade starts it. Its
// migrator (pkg/migration) creates a StorageVersionMigration, which
// kube-controller-manager's storage-version-migrator-controller runs,
// rewriting every Book as v2 through the webhook; once it has Succeeded
// the controller sets storedVersions to [v2]. The bench times that from
// the controller's start and from the migration's creation, counts the
// reviews the webhook answered meanwhile, and checks that a v2 list
// returns every Book.

// migrationControllerNS is the namespace the controller is confined to
// (--namespace) and holds its Lease: it holds no Book, so the controller
// reconciles none and its work during the run is the webhook's and the
// migrator's.
const migrationControllerNS = "migration-controller"

// MigrationResult is what a migration run measured; written as JSON.
type MigrationResult struct {
	modeRun
	// ControllerArgs is the controller's command line.
	ControllerArgs []string `json:"controllerArgs"`
	// CreateSeconds is the time to create the N Books through v1, at
	// -pre-create-c at once.
	CreateSeconds float64 `json:"createSeconds"`
	CreateC       int     `json:"createC"`
	// StoredBefore is storedVersions after the switch to crd.yaml,
	// before the controller started; StoredAfter at the end.
	StoredBefore []string `json:"storedBefore"`
	StoredAfter  []string `json:"storedAfter"`
	// LoadAvg is the load average when the controller started and when
	// storedVersions became [v2].
	LoadAvg [2]string `json:"loadAvg"`
	// FromControllerSeconds is the controller's start to storedVersions
	// [v2], as the bench saw it (polled every PollSeconds).
	FromControllerSeconds float64 `json:"fromControllerSeconds"`
	PollSeconds           float64 `json:"pollSeconds"`
	// SVM is the StorageVersionMigration, as the API server recorded it.
	SVM SVMTimes `json:"svm"`
	// BeforeSVM is the webhook's account from the controller's start to
	// the bench first seeing the migration (the watch caches' conversions);
	// DuringSVM from then to storedVersions [v2].
	BeforeSVM WebhookStats `json:"beforeSVM"`
	DuringSVM WebhookStats `json:"duringSVM"`
	// FailuresTotal counts every review not answered with success, from
	// the controller's start to the end.
	FailuresTotal float64 `json:"failuresTotal"`
	// CPUSeconds is each process's CPU time from the controller's start to
	// storedVersions [v2]: the controller, kube-apiserver, etcd,
	// kube-controller-manager and the bench.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
	// V2List is the paged v2 list of every Book after the migration.
	V2List *ListRun `json:"v2List"`
}

// SVMTimes are the StorageVersionMigration's times, from its
// creationTimestamp and its conditions' lastTransitionTime: whole seconds,
// as the API server keeps them.
type SVMTimes struct {
	Name string `json:"name"`
	// CreatedAfterControllerSeconds is its creation after the
	// controller's start (the start has sub-second precision, the
	// creation not: up to a second early, so it can be below 0).
	CreatedAfterControllerSeconds float64 `json:"createdAfterControllerSeconds"`
	// SucceededAfterCreatedSeconds is the Succeeded condition's
	// lastTransitionTime after its creation (-1: not Succeeded). The
	// Running condition says nothing of the start: at the end it is False,
	// its lastTransitionTime the end.
	SucceededAfterCreatedSeconds float64 `json:"succeededAfterCreatedSeconds"`
	// StoredV2AfterCreatedSeconds is storedVersions [v2], as the bench saw
	// it, after its creation.
	StoredV2AfterCreatedSeconds float64 `json:"storedV2AfterCreatedSeconds"`
	// Conditions are its conditions at the end, "Type=Status (reason)".
	Conditions []string `json:"conditions"`
}

func (e *env) runMigration(ctx context.Context) (err error) {
	o := e.o
	res := &MigrationResult{modeRun: e.modeRun(), CreateC: o.preCreateConcy, PollSeconds: migrationPoll.Seconds()}
	defer func() {
		if res.Finished == "" {
			return // not measured to the end: an earlier report stays
		}
		if werr := writeMigration(o, res); werr != nil {
			err = errors.Join(err, fmt.Errorf("writing the report: %w", werr))
		}
	}()
	namespaces := benchNamespaces("migration", o.convNamespaces)
	for _, ns := range append([]string{migrationControllerNS}, namespaces...) {
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	logf("creating %d Books through v1 over %d namespaces (the CRD stores v1)", o.n, len(namespaces))
	t := time.Now()
	if _, err := work(ctx, o.n, o.preCreateConcy, 0, func(i int) error {
		return createRetrying(func() error {
			_, err := e.books.WebappV1().Books(namespaces[i%len(namespaces)]).Create(ctx, newV1Book(namespaces[i%len(namespaces)], i), metav1.CreateOptions{})
			return err
		})
	}); err != nil {
		return fmt.Errorf("creating Books: %w", err)
	}
	res.CreateSeconds = round3(time.Since(t).Seconds())
	logf("created %d Books in %.1f s", o.n, res.CreateSeconds)

	if err := e.switchToV2(ctx, res); err != nil {
		return err
	}
	waitQuiet(ctx, o.maxBusy)
	pr, err := e.startMigrating(res)
	if err != nil {
		return err
	}
	defer pr.terminate()
	if err := e.measureMigration(ctx, pr, res); err != nil {
		return err
	}
	if res.V2List, err = e.timedList(ctx, pr, 0, "v2"); err != nil {
		logf("%v", err) // the check below reports it
	}
	if res.StoredAfter, err = e.storedVersions(ctx); err != nil {
		return err
	}
	if m, err := scrape(pr.metricsAddr); err == nil {
		for k, x := range m.by(reviewsMetric, "result") {
			if k != webhook.ResultSuccess {
				res.FailuresTotal += x
			}
		}
	}
	res.Finished = time.Now().UTC().Format(time.RFC3339)
	res.Checks = migrationChecks(res)
	for _, c := range res.Checks {
		logf("%s", c)
	}
	if slices.ContainsFunc(res.Checks, func(c string) bool { return strings.HasPrefix(c, "FAIL") }) {
		return errors.New("a check failed (see the report)")
	}
	return nil
}

// newV1Book is newBook as a v1 client creates it.
func newV1Book(ns string, i int) *webappv1.Book {
	b := newBook(ns, i)
	return &webappv1.Book{ObjectMeta: b.ObjectMeta, Spec: webappv1.BookSpec{Title: b.Spec.Title, Price: b.Spec.Price.WholeUnits()}}
}

// switchToV2 applies crd.yaml's spec to the Book CRD, waits until
// storedVersions lists both versions, and restarts kube-controller-manager
// (local control plane only): its garbage collector, whose caches the
// storage version migrator rewrites from, then watches Books as the API
// server now serves them, instead of finding them at its next discovery
// (every 30 s), a wait the bench would otherwise time.
func (e *env) switchToV2(ctx context.Context, res *MigrationResult) error {
	if err := framework.SwitchCRDFile(ctx, e.ext, framework.CRDFile); err != nil {
		return err
	}
	err := poll.Until(ctx, "storedVersions [v1 v2] after the switch", 100*time.Millisecond, time.Minute, func(ctx context.Context) error {
		got, err := e.storedVersions(ctx)
		if err == nil && !slices.Equal(got, []string{"v1", "v2"}) {
			err = fmt.Errorf("storedVersions %v", got)
		}
		res.StoredBefore = got
		return err
	})
	if err != nil {
		return err
	}
	logf("the CRD is crd.yaml: storedVersions %v", res.StoredBefore)
	if e.cluster == nil {
		return nil
	}
	if err := e.cluster.KillControllerManager(); err != nil {
		return fmt.Errorf("restarting kube-controller-manager: %w", err)
	}
	if err := e.cluster.StartControllerManager(ctx); err != nil {
		return fmt.Errorf("restarting kube-controller-manager: %w", err)
	}
	return nil
}

// startMigrating starts this build's controller as an upgrade does: the
// webhook on a free port of 127.0.0.1 (--webhook-loopback writes it into
// the CRD), leader election on, --storage-migration at its default (on).
func (e *env) startMigrating(res *MigrationResult) (*proc, error) {
	d := e.defaults
	spec := controllerSpec{Config: "ours", Name: "book-controller", bin: e.ours,
		args: func(ns, metrics, probe string) []string {
			a := []string{"--kubeconfig", e.kubecfg, "--namespace", ns,
				"--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
				"--webhook-bind-address", "127.0.0.1:0", "--webhook-loopback",
				"--leader-elect", "--leader-elect-namespace", ns,
				"--workers", fmt.Sprint(d.workers), "--kube-api-qps", d.qps, "--kube-api-burst", d.burst}
			return append(a, strings.Fields(e.o.ourArgs)...)
		}}
	pr, err := e.startController(spec, migrationControllerNS, "migration-controller")
	if err != nil {
		return nil, err
	}
	res.ControllerArgs = pr.args
	logf("the controller started (log %s)", pr.logPath)
	return pr, nil
}

// migrationPoll is how often the bench reads storedVersions while the
// migration runs.
const migrationPoll = 250 * time.Millisecond

// measureMigration waits, up to -migration-timeout, for storedVersions
// [v2], scraping the controller's metrics when the migration first shows
// and at the end, and reads the migration's own times.
func (e *env) measureMigration(ctx context.Context, pr *proc, res *MigrationResult) error {
	start := pr.start
	cpu0 := e.cpCPU()
	res.LoadAvg[0] = loadavg()
	var atSVM metrics
	svmSeen := false
	err := poll.Until(ctx, "storedVersions [v2], after the storage migration", migrationPoll, e.o.migrationTimeout, func(ctx context.Context) error {
		if pr.exited() {
			return poll.Stop(fmt.Errorf("the controller exited (log: %s)", pr.logPath))
		}
		if !svmSeen {
			if s, err := e.bookMigration(ctx); err == nil && s != nil {
				svmSeen = true
				atSVM, _ = scrape(pr.metricsAddr)
				logf("migration %s created, seen %.1f s after the controller's start", s.Name, time.Since(start).Seconds())
			}
		}
		got, err := e.storedVersions(ctx)
		if err == nil && !slices.Equal(got, []string{"v2"}) {
			err = fmt.Errorf("storedVersions %v", got)
		}
		return err
	})
	if err != nil {
		return err
	}
	done := time.Now()
	res.FromControllerSeconds = round3(done.Sub(start).Seconds())
	res.LoadAvg[1] = loadavg()
	ctl, _ := readProc(pr.pid)
	res.CPUSeconds = map[string]float64{"controller": round(ctl.CPUSeconds, 2)}
	for k, x := range e.cpCPU() {
		res.CPUSeconds[k] = round(x-cpu0[k], 2)
	}
	logf("storedVersions [v2] %.1f s after the controller's start", res.FromControllerSeconds)
	after, err := scrape(pr.metricsAddr)
	if err != nil {
		return fmt.Errorf("scraping the controller's metrics: %w", err)
	}
	if atSVM == nil {
		atSVM = after // the migration never showed to the bench
	}
	res.BeforeSVM, res.DuringSVM = webhookDelta(metrics{}, atSVM), webhookDelta(atSVM, after)
	s, err := e.bookMigration(ctx)
	if err != nil {
		return err
	}
	res.SVM = svmTimes(s, start, done)
	return nil
}

// storedVersions is the Book CRD's status.storedVersions.
func (e *env) storedVersions(ctx context.Context) ([]string, error) {
	crd, err := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, webhook.DefaultCRDName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return crd.Status.StoredVersions, nil
}

// bookMigration is the newest StorageVersionMigration of Books, nil when
// there is none.
func (e *env) bookMigration(ctx context.Context) (*svmv1.StorageVersionMigration, error) {
	list, err := e.kube.StoragemigrationV1().StorageVersionMigrations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out *svmv1.StorageVersionMigration
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.Resource.Group != webappv1.GroupName || s.Spec.Resource.Resource != "books" {
			continue
		}
		if out == nil || out.CreationTimestamp.Before(&s.CreationTimestamp) {
			out = s
		}
	}
	return out, nil
}

// svmTimes are s's times against the controller's start and the moment
// storedVersions was seen to be [v2]; a nil s (no migration found) has no
// name and its times -1.
func svmTimes(s *svmv1.StorageVersionMigration, start, storedV2 time.Time) SVMTimes {
	t := SVMTimes{SucceededAfterCreatedSeconds: -1, StoredV2AfterCreatedSeconds: -1}
	if s == nil {
		return t
	}
	created := s.CreationTimestamp.Time
	t.Name = s.Name
	t.CreatedAfterControllerSeconds = round3(created.Sub(start).Seconds())
	t.StoredV2AfterCreatedSeconds = round3(storedV2.Sub(created).Seconds())
	for _, c := range s.Status.Conditions {
		t.Conditions = append(t.Conditions, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
		if c.Type == string(svmv1.MigrationSucceeded) && c.Status == metav1.ConditionTrue {
			t.SucceededAfterCreatedSeconds = round3(c.LastTransitionTime.Sub(created).Seconds())
		}
	}
	return t
}

// migrationChecks: storedVersions is [v2] alone, the migration Succeeded,
// a v2 list returns every Book (none lost), no review failed.
func migrationChecks(r *MigrationResult) []string {
	var out []string
	check := func(ok bool, format string, args ...any) {
		out = append(out, passFail(ok)+": "+fmt.Sprintf(format, args...))
	}
	check(slices.Equal(r.StoredAfter, []string{"v2"}), "storedVersions at the end: %v (want [v2])", r.StoredAfter)
	check(r.SVM.SucceededAfterCreatedSeconds >= 0, "the StorageVersionMigration %q Succeeded (conditions %v)", r.SVM.Name, r.SVM.Conditions)
	items := 0
	if r.V2List != nil {
		items = r.V2List.Items
	}
	check(items == r.N, "a v2 list returns %d Books of %d created: %d lost", items, r.N, r.N-items)
	check(r.FailuresTotal == 0, "reviews not answered with success from the controller's start to the end: %g (want 0)", r.FailuresTotal)
	return out
}

// benchNamespaces names count namespaces prefix-00, prefix-01, ….
func benchNamespaces(prefix string, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// rereportMigration writes the report of an earlier run's JSON again.
func rereportMigration(o options) error {
	res := &MigrationResult{}
	if err := readReport(o.report, "migration", res); err != nil {
		return err
	}
	return writeMigration(o, res)
}

// writeMigration writes migration.json and .md (migration-<label>.* for
// any -label but the default).
func writeMigration(o options, r *MigrationResult) error {
	return writeModeReport(o, "migration", r, migrationMarkdown(r))
}
