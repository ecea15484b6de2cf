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
	"math"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// migrationTimeout bounds the storage migration of upgradeBooks Books:
// 43–50 s on a quiet 2-core machine, 1m47s–2m54s on a shared one, against 14–25 s for as many
// objects without a webhook in test/integration/migration. Part of the
// difference may be waiting: kube-controller-manager's migrator starts only
// once its garbage collector monitors the resource and has seen the
// migration's resourceVersion, and checks again after a delay that doubles
// (kubernetes/pkg/controller/storageversionmigrator, 1.37.2).
const migrationTimeout = 8 * time.Minute

// upgrade installs this build as `kubectl apply -k` does: the two-version
// CRD first, then a rolling update of the controller. While the release's
// controller still leads and this build's stands by (the update's
// overlap), Books change through both versions; then the release's stops.
// This build's takes the Lease and migrates the stored Books to v2. No
// ConfigMap is written back and forth: the release wrote each edit's v1
// keys once; this build then wrote, once, the ConfigMaps of the Books
// edited through v2, adding the keys only it writes (amount, currency,
// authors: docs/behaviour.md), and no other ConfigMap, since a price v1
// can say gets the same data from both.
func (r *release) upgrade(t *testing.T) {
	writes := watchWrites(t, r.ns)
	env.SwitchCRD(t, framework.CRDFile)
	framework.Eventually(t, "storedVersions [v1 v2]", env.StoredVersionsAre(framework.BookCRD, "v1", "v2"))
	newer := env.StartReplica(t, binary, "this-build", framework.ReplicaOptions{Namespace: r.ns, LeaseID: leaseID,
		Args: []string{"--webhook-loopback", "--webhook-bind-address", framework.FreeAddr(t)}})
	framework.Eventually(t, "v1 reads through this build's conversion webhook", env.V1ListWorks(r.ns))
	want := r.editThroughBothVersions(t, "upgrade", 20)
	waitConverged(t, "the edits in their ConfigMaps, written by "+lastV1Release, configMapsHold(r.ns, want))

	stopped := time.Now()
	if err := r.old.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := r.old.Wait(framework.Timeout); err != nil || code != 0 {
		t.Fatalf("%s after SIGTERM: exit code %d, %v", lastV1Release, code, err)
	}
	env.WaitForLeaseHolder(t, r.ns, leaseID, newer)
	poll.Eventually(t, "storedVersions [v2], after the storage migration", framework.PollInterval, migrationTimeout, env.StoredVersionsAre(framework.BookCRD, "v2"))
	t.Logf("storedVersions [v2] %v after %s stopped", time.Since(stopped).Round(time.Millisecond), lastV1Release)
	logMigrations(t, stopped)
	waitConverged(t, fmt.Sprintf("%d Books in %s Ready", upgradeBooks, r.ns), env.BooksReady(r.ns, upgradeBooks))
	wantNewer := r.withV2Keys(want)
	waitConverged(t, "the v2 keys of the Books edited through v2, written by this build", configMapsHold(r.ns, wantNewer))
	r.expectConfigMaps(t, wantNewer)
	writes.expect(t, r.configMaps, want, wantNewer)
	r.newer = newer
}

// withV2Keys is want with the keys this build adds to the ConfigMap of each
// Book edited through v2 (editV2Price): the amount, the currency and the
// author.
func (r *release) withV2Keys(want map[string]map[string]string) map[string]map[string]string {
	out := maps.Clone(want)
	for name, price := range r.v2Prices {
		data := withValue(out[name], controller.AmountKey, price.Amount)
		data[controller.CurrencyKey] = price.Currency
		data[controller.AuthorsKey] = `["` + v2Author + `"]`
		out[name] = data
	}
	return out
}

// editThroughBothVersions changes Books while two controllers run: every
// 20th from the 0th gets a title through v1; every 20th from the 10th a
// price in EUR with cents and an author through v2, which v1 sees as the
// price rounded. It returns the ConfigMaps' data they should then hold,
// which is r.configMaps with the edits.
func (r *release) editThroughBothVersions(t *testing.T, label string, every int) map[string]map[string]string {
	want := map[string]map[string]string{}
	for name, data := range r.configMaps {
		want[name] = data
	}
	for i := 0; i < upgradeBooks; i += every {
		name := r.names[i]
		title := fmt.Sprintf("Edited through v1 during the %s: %s", label, name)
		r.editV1Title(t, name, title)
		want[name] = withValue(want[name], controller.TitleKey, title)
	}
	for i := every / 2; i < upgradeBooks; i += every {
		name := r.names[i]
		price := r.editV2Price(t, name)
		want[name] = withValue(want[name], controller.PriceKey, strconv.Itoa(price))
	}
	return want
}

// editV1Title sets the title of the Book name through v1.
func (r *release) editV1Title(t *testing.T, name, title string) {
	books := env.Books.WebappV1().Books(r.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := books.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		b.Spec.Title = title
		_, err = books.Update(t.Context(), b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("editing %s through v1: %v", name, err)
	}
}

// editV2Price gives the Book name, through v2, the price <its amount + 1>.25
// EUR and an author, and returns the whole price a v1 client then reads.
func (r *release) editV2Price(t *testing.T, name string) int {
	books := env.Books.WebappV2().Books(r.ns)
	var price webappv2.Price
	var v1Price int
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		b, err := books.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		whole, err := strconv.Atoi(b.Spec.Price.Amount)
		if err != nil || b.Spec.Price.Currency != "XXX" {
			return fmt.Errorf("the v2 price of a v1 Book is %+v, want a whole amount in XXX", b.Spec.Price)
		}
		v1Price = min(whole+1, math.MaxInt32) // .25 rounds down; v1 clamps to int32
		price = webappv2.Price{Amount: strconv.Itoa(whole+1) + ".25", Currency: "EUR"}
		b.Spec.Price, b.Spec.Authors = price, []string{v2Author}
		_, err = books.Update(t.Context(), b, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("editing %s through v2: %v", name, err)
	}
	r.v2Prices[name] = price
	return v1Price
}

// v2Author is the author an edit through v2 gives, which v1 cannot say.
const v2Author = "Edited Through V2"

// logMigrations logs each Book StorageVersionMigration: when it was
// created and when it succeeded or failed, counted from since.
func logMigrations(t *testing.T, since time.Time) {
	list, err := env.Kube.StoragemigrationV1().StorageVersionMigrations().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Spec.Resource.Group != webappv2.SchemeGroupVersion.Group {
			continue
		}
		line := fmt.Sprintf("migration %s: created %v after %s stopped", s.Name, s.CreationTimestamp.Sub(since).Round(time.Second), lastV1Release)
		for _, c := range s.Status.Conditions {
			if c.Status == metav1.ConditionTrue {
				line += fmt.Sprintf(", %s at %v", c.Type, c.LastTransitionTime.Sub(since).Round(time.Second))
			}
		}
		t.Log(line)
	}
}
