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
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// spec is what a test last wrote into a Book's spec.
type spec struct {
	title string
	price int32
}

func bookName(prefix string, i int) string { return framework.BookName(prefix, i) }

// createBooks creates n Books named prefix-00000 on, and returns their specs.
func createBooks(t *testing.T, ns, prefix string, n int) map[string]spec {
	t.Helper()
	return createBooksIn(t, env, ns, prefix, n)
}

// createBooksIn is createBooks on the control plane e (a test's own).
func createBooksIn(t *testing.T, e *framework.Env, ns, prefix string, n int) map[string]spec {
	t.Helper()
	specs := make(map[string]spec, n)
	for _, b := range framework.NumberedBooks(ns, prefix, n) {
		specs[b.Name] = spec{title: b.Spec.Title, price: b.Spec.Price.WholeUnits()}
	}
	createSpecsIn(t, e, ns, specs)
	return specs
}

// createSpecs creates a Book for each entry (framework.CreateAll: a few at
// a time, retrying what fails while the control plane recovers from a
// fault).
func createSpecs(t *testing.T, ns string, specs map[string]spec) {
	t.Helper()
	createSpecsIn(t, env, ns, specs)
}

// createSpecsIn is createSpecs on the control plane e.
func createSpecsIn(t *testing.T, e *framework.Env, ns string, specs map[string]spec) {
	t.Helper()
	var books []*webappv2.Book
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		books = append(books, framework.NewBook(ns, name, specs[name].title, specs[name].price))
	}
	e.CreateAll(t, books)
}

// updateSpecs gives each named Book the spec next returns, reading the Book
// afresh on conflicts, and returns the specs written.
func updateSpecs(t *testing.T, ns string, names []string, next func(name string, old webappv2.BookSpec) spec) map[string]spec {
	t.Helper()
	return updateSpecsIn(t, env, ns, names, next)
}

// updateSpecsIn is updateSpecs on the control plane e.
func updateSpecsIn(t *testing.T, e *framework.Env, ns string, names []string, next func(name string, old webappv2.BookSpec) spec) map[string]spec {
	t.Helper()
	books := e.Books.WebappV2().Books(ns)
	var mu sync.Mutex
	written := make(map[string]spec, len(names))
	framework.Parallel(t, len(names), framework.CreateWidth, func(ctx context.Context, i int) error {
		name := names[i]
		return framework.RetryTransient(ctx, func() error {
			b, err := books.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s := next(name, b.Spec)
			b.Spec.Title, b.Spec.Price = s.title, webappv2.WholePrice(s.price)
			if _, err := books.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			mu.Lock()
			written[name] = s
			mu.Unlock()
			return nil
		})
	})
	return written
}

// expectation is what the end state of a namespace must be.
type expectation struct {
	// want holds every Book that must exist, with the spec last written.
	want map[string]spec
	// conflict names Books whose ConfigMap name is taken by a foreign
	// object: they must be Ready=False ConfigMapConflict and control no
	// ConfigMap.
	conflict map[string]bool
	// earlier names Books whose ConfigMap name is taken by a ConfigMap
	// controlled by a Book of the same name and another UID: they must be
	// Ready=False ConfigMapOfEarlierBook and control no ConfigMap.
	earlier map[string]bool
	// ignore lists foreign ConfigMaps that carry our labels on purpose.
	ignore map[types.UID]bool
}

// verdict is what inspect found.
type verdict struct {
	books      int
	lost       int // Books missing, or without their one correct ConfigMap and Ready status
	duplicated int // ConfigMaps beyond one per Book, or controlled by no existing Book
	problems   []string
}

func (v *verdict) add(counter *int, format string, args ...any) {
	if counter != nil {
		*counter++
	}
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

var bookGroup = webappv2.SchemeGroupVersion.Group

// inspect checks the namespace against exp: every Book exists with the
// expected spec, is Ready for its current generation and controls exactly
// one ConfigMap, of its name, holding that spec; no ConfigMap with our label
// is orphaned.
func inspect(ctx context.Context, ns string, exp expectation) (verdict, error) {
	return inspectIn(ctx, env, ns, exp)
}

// inspectIn is inspect on the control plane e.
func inspectIn(ctx context.Context, e *framework.Env, ns string, exp expectation) (verdict, error) {
	var v verdict
	bookList, err := e.Books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return v, err
	}
	cmList, err := e.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return v, err
	}
	v.books = len(bookList.Items)
	byUID := map[types.UID]*webappv2.Book{}
	byName := map[string]*webappv2.Book{}
	for i := range bookList.Items {
		b := &bookList.Items[i]
		byUID[b.UID], byName[b.Name] = b, b
	}
	owned := map[types.UID][]*corev1.ConfigMap{}
	for i := range cmList.Items {
		cm := &cmList.Items[i]
		if exp.ignore[cm.UID] {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(cm)
		if ref != nil && ref.Kind == "Book" && groupOf(ref.APIVersion) == bookGroup {
			if _, ok := byUID[ref.UID]; ok {
				owned[ref.UID] = append(owned[ref.UID], cm)
				continue
			}
			v.add(&v.duplicated, "ConfigMap %s is controlled by Book %s with UID %s, which does not exist", cm.Name, ref.Name, ref.UID)
			continue
		}
		if cm.Labels[controller.ManagedByLabel] == controller.ManagedByValue {
			v.add(&v.duplicated, "ConfigMap %s carries our label but no Book controls it", cm.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(exp.want)) {
		if byName[name] == nil {
			v.add(&v.lost, "Book %s is gone", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		b := byName[name]
		if exp.want != nil {
			s, ok := exp.want[name]
			switch {
			case !ok:
				v.add(nil, "Book %s was not created by the test", name)
			case b.Spec.Title != s.title || b.Spec.Price != webappv2.WholePrice(s.price):
				v.add(&v.lost, "Book %s has spec %q/%d, the test last wrote %q/%d", name, b.Spec.Title, b.Spec.Price.WholeUnits(), s.title, s.price)
			}
		}
		cms := owned[b.UID]
		if exp.conflict[name] || exp.earlier[name] {
			reason := controller.ReasonConfigMapConflict
			if exp.earlier[name] {
				reason = controller.ReasonConfigMapOfEarlierBook
			}
			if len(cms) != 0 {
				v.add(&v.duplicated, "Book %s controls %d ConfigMaps although its name is taken", name, len(cms))
			}
			if !framework.ReadyAs(b, metav1.ConditionFalse, reason) {
				v.add(&v.lost, "Book %s: want Ready=False %s for generation %d, status is %s", name,
					reason, b.Generation, framework.DescribeBook(b))
			}
			continue
		}
		switch {
		case len(cms) == 0:
			v.add(&v.lost, "Book %s controls no ConfigMap", name)
		case len(cms) > 1:
			v.duplicated += len(cms) - 1
			v.add(nil, "Book %s controls %d ConfigMaps", name, len(cms))
		}
		if len(cms) >= 1 {
			if p := configMapProblem(b, cms[0]); p != "" {
				v.add(&v.lost, "Book %s: %s", name, p)
			}
		}
		if !framework.ReadyAs(b, metav1.ConditionTrue, controller.ReasonConfigMapReady) || b.Status.ConfigMapName != name {
			v.add(&v.lost, "Book %s: want Ready=True %s for generation %d, status is %s", name,
				controller.ReasonConfigMapReady, b.Generation, framework.DescribeBook(b))
		}
	}
	return v, nil
}

// configMapProblem says what is wrong with the ConfigMap a Book controls,
// or "" if it is exactly what the Book asks for.
func configMapProblem(b *webappv2.Book, cm *corev1.ConfigMap) string {
	wantData := map[string]string{
		controller.TitleKey: b.Spec.Title,
		controller.PriceKey: strconv.FormatInt(int64(b.Spec.Price.WholeUnits()), 10),
	}
	switch {
	case cm.Name != b.Name:
		return fmt.Sprintf("its ConfigMap is named %s", cm.Name)
	case !maps.Equal(cm.Data, wantData) || len(cm.BinaryData) != 0:
		return fmt.Sprintf("ConfigMap data %q, want %q", cm.Data, wantData)
	case cm.Labels[controller.ManagedByLabel] != controller.ManagedByValue:
		return fmt.Sprintf("ConfigMap labels %v lack %s", cm.Labels, controller.ManagedBySelector)
	case len(validation.IsValidLabelValue(b.Name)) == 0 && cm.Labels[controller.BookLabel] != b.Name:
		return fmt.Sprintf("ConfigMap labels %v lack %s=%s", cm.Labels, controller.BookLabel, b.Name)
	}
	return ""
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// convergeTimeout is how long n Books may take to converge after the last
// fault: generous, since after an outage every key that failed is retried
// under the controller's default rate limit (100 retries a second overall,
// burst 1000: controller.Options.RateLimiter), on a machine the API server
// shares with the test.
func convergeTimeout(n int) time.Duration {
	return 2*time.Minute + time.Duration(n)*150*time.Millisecond
}

// waitConverged polls inspect until the namespace matches exp, and adds the
// outcome to the run's tally. On timeout it fails the test with the first
// problems found. It returns how long convergence took.
func waitConverged(t *testing.T, ns string, exp expectation) time.Duration {
	t.Helper()
	return waitConvergedIn(t, env, ns, exp)
}

// waitConvergedIn is waitConverged on the control plane e.
func waitConvergedIn(t *testing.T, e *framework.Env, ns string, exp expectation) time.Duration {
	t.Helper()
	start := time.Now()
	v, err := convergeIn(t.Context(), e, ns, exp)
	checked.Add(int64(v.books))
	if err == nil {
		return time.Since(start)
	}
	lost.Add(int64(v.lost))
	duplicated.Add(int64(v.duplicated))
	t.Fatal(err)
	return 0
}

// converge polls inspect until the namespace matches exp or
// convergeTimeout passes, and returns the last verdict and, on timeout, an
// error that shows its first problems.
func converge(ctx context.Context, ns string, exp expectation) (verdict, error) {
	return convergeIn(ctx, env, ns, exp)
}

// convergeIn is converge on the control plane e.
func convergeIn(ctx context.Context, e *framework.Env, ns string, exp expectation) (verdict, error) {
	var v verdict
	// An inspection lists every Book and ConfigMap of the namespace: once a
	// second is often enough.
	err := poll.Until(ctx, "namespace "+ns+" to converge", time.Second, convergeTimeout(len(exp.want)), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, err := inspectIn(ctx, e, ns, exp)
		if err != nil {
			return fmt.Errorf("inspection failed: %w", err)
		}
		v = got
		if len(v.problems) == 0 {
			return nil
		}
		shown := v.problems[:min(len(v.problems), 15)]
		return fmt.Errorf("%d Books, %d lost, %d duplicated, %d problems; the first:\n  %s",
			v.books, v.lost, v.duplicated, len(v.problems), strings.Join(shown, "\n  "))
	})
	return v, err
}

// pollInterval is how often the chaos tests look at what they wait for.
const pollInterval = 50 * time.Millisecond

// metricValue scrapes the in-process controller's /metrics at addr.
func metricValue(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	v, err := framework.MetricValue(framework.Scrape(t, addr), name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitMetricsUp waits until addr serves /metrics.
func waitMetricsUp(t *testing.T, addr string) {
	t.Helper()
	poll.Eventually(t, "/metrics on "+addr, pollInterval, time.Minute, framework.AnswersOK(addr, "/metrics"))
}

// reconciledOK is the process-wide count of successful syncs.
func reconciledOK(t *testing.T, addr string) float64 {
	return metricValue(t, addr, "book_controller_reconcile_total", "controller", controller.Name, "result", "success")
}

// waitSynced waits until at Books more than base have synced successfully,
// as the controller at addr counts them, and returns how many did.
func waitSynced(t *testing.T, addr string, base float64, at, n int) int {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("%d Books to sync", at), pollInterval, convergeTimeout(n), func(context.Context) error {
		synced := reconciledOK(t, addr) - base
		return poll.Done(synced >= float64(at), "%v synced", synced)
	})
	return int(reconciledOK(t, addr) - base)
}

// startBinary runs the controller binary as a process for namespace ns,
// as the cluster admin, with every write logged (-v=2). Probes are off so
// that processes never compete for a port.
func startBinary(t *testing.T, name, ns string, args ...string) *framework.Process {
	t.Helper()
	base := []string{"--kubeconfig", env.Cluster.KubeconfigPath(), "--namespace", ns,
		"--health-probe-bind-address", "0", "-v=2"}
	base = append(base, framework.LayerArgs()...)
	return framework.StartProcess(t, name, binary, append(base, args...)...)
}

// writeMessages are the -v=2 log messages of the controller's writes.
var writeMessages = []string{`"Created ConfigMap"`, `"Updated ConfigMap"`, `"Updated status"`}

func isWriteLine(text string) bool {
	for _, m := range writeMessages {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// writesLogged counts the write log lines of a controller process so far.
func writesLogged(p *framework.Process) int {
	n := 0
	for _, l := range p.Lines() {
		if isWriteLine(l.Text) {
			n++
		}
	}
	return n
}

// waitWritesLogged waits until p has logged k writes more than before.
func waitWritesLogged(t *testing.T, p *framework.Process, before, k int) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("%s to log %d more writes", p.Name, k), pollInterval, time.Minute, func(context.Context) error {
		n := writesLogged(p) - before
		if n < k && !p.Running() {
			t.Fatalf("%s exited after %d more writes, before the %dth:\n%s", p.Name, n, k, p.Tail(20))
		}
		return poll.Done(n >= k, "%d more writes logged", n)
	})
}

// workRound is round r of rounds of work for a test that kills something
// between rounds: it creates this round's share of config.books Books and,
// after the first round, changes the specs of a random quarter-round of the
// Books so far. want is updated with the spec each Book must end with. It
// returns how many Books it created.
func workRound(t *testing.T, ns string, rng *rand.Rand, want map[string]spec, r, rounds int) (batch int) {
	t.Helper()
	perRound := max(1, config.books/rounds)
	batch = perRound
	if r == rounds-1 {
		batch = config.books - perRound*(rounds-1)
	}
	maps.Copy(want, createBooks(t, ns, fmt.Sprintf("r%02d", r), batch))
	if r == 0 {
		return batch
	}
	names := slices.Sorted(maps.Keys(want))
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	maps.Copy(want, updateSpecs(t, ns, names[:max(1, perRound/4)], func(name string, old webappv2.BookSpec) spec {
		return spec{title: fmt.Sprintf("%s, round %d", name, r), price: old.Price.WholeUnits() + int32(r)}
	}))
	return batch
}
