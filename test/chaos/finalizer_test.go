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
	"errors"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// Finalizers (issue 27, item 6): another controller's finalizer holds a
// Book's ConfigMap after its deletion was asked for. The integration tests
// (test/integration/controller/finalizer_test.go) show one Book on a quiet
// controller; here several Books are held at once and freed one after
// another while the controller is busy with the rest of the namespace:
// background Books are edited all along. The controller runs with the
// production conflict recheck (30 s), so only the held ConfigMap's
// deletion event can bring a Book to its own ConfigMap within freeBound.

const (
	// foreignFinalizer is "someone else's" finalizer.
	foreignFinalizer = "example.com/someone-elses"
	// freeBound is how soon after the held ConfigMap's deletion the Book
	// must have its own ConfigMap and be Ready (issue 27).
	freeBound = 2 * time.Second
	// heldBooks are held at once; backgroundBooks are edited meanwhile.
	heldBooks, backgroundBooks = 5, 100
	// churnEvery is the pace of the background edits.
	churnEvery = 100 * time.Millisecond
)

// TestFinalizerRecreatedBooks is the case with five Books at once:
// each is Ready; its ConfigMap gets a foreign finalizer; the Books are
// deleted, and once the garbage collector has asked for their ConfigMaps'
// deletion the Books are created anew: they wait with
// ConfigMapOfEarlierBook, no Warning. The finalizers are then removed one
// by one, at random moments: each new Book must have its own ConfigMap and
// be Ready within freeBound of its old ConfigMap's deletion.
func TestFinalizerRecreatedBooks(t *testing.T) {
	ctx := context.Background()
	rng := newRand(t)
	ns := env.Namespace(t)
	env.StartController(t, framework.ControllerOptions{Namespace: ns, ConflictRecheck: controller.DefaultConflictRecheck})
	books := env.Books.WebappV2().Books(ns)
	background := createBooks(t, ns, "bg", backgroundBooks)
	first := createBooks(t, ns, "again", heldBooks)
	waitConverged(t, ns, expectation{want: union(background, first)})
	stop := churn(t, ns, background)

	heldNames := sortedNames(first)
	for _, name := range heldNames {
		holdConfigMap(t, ns, name)
	}
	for _, name := range heldNames {
		if err := books.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	faults.Add(int64(len(heldNames)))
	held := map[string]*corev1.ConfigMap{}
	for _, name := range heldNames {
		held[name] = env.WaitForConfigMap(t, ns, name, "to be deleted by the garbage collector and held by "+foreignFinalizer,
			func(cm *corev1.ConfigMap) bool { return cm.DeletionTimestamp != nil })
		framework.Eventually(t, "Book "+name+" to be gone", func(ctx context.Context) error {
			_, err := books.Get(ctx, name, metav1.GetOptions{})
			return poll.Done(apierrors.IsNotFound(err), "Get: %v", err)
		})
	}
	second := map[string]spec{}
	for _, name := range heldNames {
		second[name] = spec{title: "Second life of " + name, price: first[name].price + 100}
	}
	createSpecs(t, ns, second)
	for _, name := range heldNames {
		env.WaitForReady(t, ns, name, metav1.ConditionFalse, controller.ReasonConfigMapOfEarlierBook)
	}
	expectHeldUntouched(t, ns, held)

	freed := releaseHeld(t, ns, held, second, rng)
	edits, final := stop()
	converged := waitConverged(t, ns, expectation{want: union(final, second)})
	if w := bookWarnings(t, ns); len(w) != 0 {
		t.Errorf("Warning events, though nobody had anything to fix: %v", w)
	}
	figure(t, "%d Books recreated while their earlier ConfigMaps were held, freed one by one during %d edits of %d other Books: "+
		"own ConfigMap created %s after each deletion (bound %v), Ready %s; 0 Warnings; all converged %v after the edits",
		len(heldNames), edits, backgroundBooks, freed.created(), freeBound, freed.ready(), converged.Round(10*time.Millisecond))
}

// TestFinalizerEditWhileHeld: someone deletes the ConfigMaps of five Ready
// Books while a finalizer of theirs holds them, and the Books are edited
// while their ConfigMaps wait to go. The Books must say Ready=False
// ConfigMapDeleting for their new generation, and the held ConfigMaps stay
// untouched (a write would be lost with them); once each finalizer is
// removed, the edit must land in the Book's new ConfigMap within freeBound
// of the old one's deletion.
func TestFinalizerEditWhileHeld(t *testing.T) {
	ctx := context.Background()
	rng := newRand(t)
	ns := env.Namespace(t)
	syncs := newSyncLog()
	env.StartController(t, framework.ControllerOptions{Namespace: ns, ConflictRecheck: controller.DefaultConflictRecheck, Observer: syncs})
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	background := createBooks(t, ns, "bg", backgroundBooks)
	before := createBooks(t, ns, "held", heldBooks)
	waitConverged(t, ns, expectation{want: union(background, before)})
	stop := churn(t, ns, background)

	heldNames := sortedNames(before)
	for _, name := range heldNames {
		holdConfigMap(t, ns, name)
	}
	holding := time.Now()
	for _, name := range heldNames {
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	faults.Add(int64(len(heldNames)))
	held := map[string]*corev1.ConfigMap{}
	for _, name := range heldNames {
		held[name] = env.WaitForConfigMap(t, ns, name, "to be deleted and held by "+foreignFinalizer,
			func(cm *corev1.ConfigMap) bool { return cm.DeletionTimestamp != nil })
	}
	edits := updateSpecs(t, ns, heldNames, func(name string, old webappv2.BookSpec) spec {
		return spec{title: "Edited while held: " + name, price: old.Price.WholeUnits() + 500}
	})
	for _, name := range heldNames {
		env.WaitForReady(t, ns, name, metav1.ConditionFalse, controller.ReasonConfigMapDeleting)
	}
	// Under the hold, looked at again: the Books keep saying why, and
	// nothing is written into the held ConfigMaps.
	nudge(t, syncs, ns, heldNames)
	for _, name := range heldNames {
		b, err := env.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(b.Status.Conditions, controller.ConditionReady); c == nil ||
			c.Reason != controller.ReasonConfigMapDeleting || c.ObservedGeneration != b.Generation {
			t.Errorf("during the hold: Book %s is %s, want Ready=False %s for generation %d", name,
				framework.DescribeBook(b), controller.ReasonConfigMapDeleting, b.Generation)
		}
	}
	expectHeldUntouched(t, ns, held)
	heldWrites := 0
	for _, w := range controllerWrites(t, ns) {
		if w.Resource == "configmaps" && !w.At.Before(holding) && slices.Contains(heldNames, strings.TrimPrefix(w.Object, ns+"/")) {
			heldWrites++
			t.Errorf("the controller wrote a held ConfigMap: %s", w)
		}
	}
	deleting := bookWarnings(t, ns)

	freed := releaseHeld(t, ns, held, edits, rng)
	churned, final := stop()
	converged := waitConverged(t, ns, expectation{want: union(final, edits)})
	figure(t, "%d Books edited while their ConfigMaps were deleted and held (%d controller writes to them during the hold; "+
		"Warnings %v), freed one by one during %d edits of %d other Books: edit landed in a new ConfigMap %s after each deletion "+
		"(bound %v), Ready %s; all converged %v after the edits",
		len(heldNames), heldWrites, deleting, churned, backgroundBooks, freed.created(), freeBound, freed.ready(),
		converged.Round(10*time.Millisecond))
}

// holdConfigMap adds foreignFinalizer to the ConfigMap ns/name, and removes
// it at the end of the test should the test not get that far, so that the
// namespace can go.
func holdConfigMap(t *testing.T, ns, name string) {
	t.Helper()
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm.Finalizers = append(cm.Finalizers, foreignFinalizer)
		_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("adding %s to ConfigMap %s/%s: %v", foreignFinalizer, ns, name, err)
	}
	t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return dropFinalizer(context.Background(), ns, name) })
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing %s from ConfigMap %s/%s: %v", foreignFinalizer, ns, name, err)
		}
	})
}

// dropFinalizer removes foreignFinalizer from the ConfigMap ns/name if it
// is there. The update that removes the last finalizer of an object being
// deleted deletes it before the API server answers.
func dropFinalizer(ctx context.Context, ns, name string) error {
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil || !slices.Contains(cm.Finalizers, foreignFinalizer) {
		return err
	}
	cm.Finalizers = slices.DeleteFunc(cm.Finalizers, func(f string) bool { return f == foreignFinalizer })
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// expectHeldUntouched checks that every held ConfigMap is still there as
// it was when it was seen held.
func expectHeldUntouched(t *testing.T, ns string, held map[string]*corev1.ConfigMap) {
	t.Helper()
	for _, name := range sortedNames(held) {
		was := held[name]
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.UID != was.UID || cm.ResourceVersion != was.ResourceVersion {
			t.Errorf("held ConfigMap %s was changed or replaced:\nbefore %+v\nafter  %+v", name, was, cm)
		}
	}
}

// freedBook is how long after its held ConfigMap's deletion a Book's own
// ConfigMap was created (the audit log's time of the controller's create,
// from just before the finalizer's removal was sent: an upper bound) and
// the test saw the Book Ready.
type freedBook struct {
	name           string
	created, ready time.Duration
}

type freedBooks []freedBook

func (f freedBooks) created() string {
	return joinDurations(f, func(b freedBook) time.Duration { return b.created })
}

func (f freedBooks) ready() string {
	return joinDurations(f, func(b freedBook) time.Duration { return b.ready })
}

func joinDurations(f freedBooks, d func(freedBook) time.Duration) string {
	var parts []string
	for _, b := range f {
		parts = append(parts, d(b).Round(time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}

// releaseHeld removes foreignFinalizer from each held ConfigMap in turn, at
// random intervals, and waits each time until the Book of its name (want
// holds its spec) controls a new ConfigMap with that spec and is Ready for
// its generation. Each must be within freeBound.
func releaseHeld(t *testing.T, ns string, held map[string]*corev1.ConfigMap, want map[string]spec, rng *rand.Rand) freedBooks {
	t.Helper()
	ctx := context.Background()
	sent := map[string]time.Time{}
	var out freedBooks
	for _, name := range sortedNames(held) {
		time.Sleep(500*time.Millisecond + time.Duration(rng.IntN(1000))*time.Millisecond)
		sent[name] = time.Now()
		if err := dropFinalizer(ctx, ns, name); err != nil {
			t.Fatalf("removing %s from ConfigMap %s/%s: %v", foreignFinalizer, ns, name, err)
		}
		f := freedBook{name: name}
		s := want[name]
		poll.Eventually(t, fmt.Sprintf("Book %s Ready with its own ConfigMap (want within %v of the held one's deletion)", name, freeBound),
			20*time.Millisecond, 10*freeBound, func(ctx context.Context) error {
				b, err := env.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				c := meta.FindStatusCondition(b.Status.Conditions, controller.ConditionReady)
				switch {
				case cm.UID == held[name].UID:
					return poll.Stop(fmt.Errorf("the held ConfigMap is still there after its last finalizer was removed: %+v", cm))
				case !metav1.IsControlledBy(cm, b) || cm.Data[controller.TitleKey] != s.title || cm.Data[controller.PriceKey] != strconv.Itoa(int(s.price)):
					return fmt.Errorf("ConfigMap %s: data %v, owners %v", cm.UID, cm.Data, cm.OwnerReferences)
				case c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != b.Generation:
					return errors.New(framework.DescribeBook(b))
				}
				f.ready = time.Since(sent[name])
				return nil
			})
		out = append(out, f)
	}
	writes := controllerWrites(t, ns)
	for i := range out {
		f := &out[i]
		for _, w := range writes {
			if w.Resource == "configmaps" && w.Verb == "create" && w.Code == 201 && w.Object == ns+"/"+f.name && !w.At.Before(sent[f.name]) {
				f.created = w.At.Sub(sent[f.name])
				break
			}
		}
		switch {
		case f.created == 0:
			t.Errorf("Book %s: the audit log shows no create of its new ConfigMap by the controller", f.name)
		case f.created > freeBound || f.ready > freeBound:
			t.Errorf("Book %s: its own ConfigMap was created %v and the Book seen Ready %v after the held one's deletion, want within %v",
				f.name, f.created.Round(time.Millisecond), f.ready.Round(time.Millisecond), freeBound)
		}
	}
	return out
}

// churn edits a random Book of want every churnEvery until the returned
// stop is called, which returns how many edits were made and the specs the
// Books must end with.
func churn(t *testing.T, ns string, want map[string]spec) (stop func() (int, map[string]spec)) {
	t.Helper()
	rng := newRand(t)
	specs := maps.Clone(want)
	bookNames := sortedNames(want)
	books := env.Books.WebappV2().Books(ns)
	done, finished := make(chan struct{}), make(chan struct{})
	var errs []error
	edits := 0
	go func() {
		defer close(finished)
		ctx := context.Background()
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			case <-time.After(churnEvery):
			}
			name := bookNames[rng.IntN(len(bookNames))]
			s := spec{title: fmt.Sprintf("%s, edit %d", name, k), price: int32(k)}
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				b, err := books.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				b.Spec.Title, b.Spec.Price = s.title, webappv2.WholePrice(s.price)
				_, err = books.Update(ctx, b, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				// The edit may have landed all the same: take the spec as it is.
				errs = append(errs, fmt.Errorf("editing Book %s: %w", name, err))
				if b, err := books.Get(ctx, name, metav1.GetOptions{}); err == nil {
					specs[name] = spec{title: b.Spec.Title, price: b.Spec.Price.WholeUnits()}
				}
				continue
			}
			specs[name] = s
			edits++
		}
	}()
	var once sync.Once
	halt := func() {
		once.Do(func() {
			close(done)
			<-finished
		})
	}
	t.Cleanup(halt)
	return func() (int, map[string]spec) {
		halt()
		for _, err := range errs {
			t.Error(err)
		}
		return edits, specs
	}
}
