//go:build linux

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

package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/shard"
	"ydzs.io/book-controller/test/integration/framework"
)

const shards = 3

// TestShardsSpreadAndEachBookHasOneWriter: three replicas with --shards 3
// and no other flag take a shard each; every Book becomes Ready; each
// replica caches the Books of its shard and their ConfigMaps, and no
// other. The namespaces are named alike (spread-team-00 …), which a hash
// of the namespace would have put in one shard. A ConfigMap whose bucket
// label is stripped, and one relabelled into another shard's bucket, are
// repaired by their Book's shard; the replica that now sees the relabelled
// one, without its Book, writes nothing. The audit log shows every write
// concerning a shard's Books made by the holder of its Lease, while it
// held it, and each Book written by one replica only.
func TestShardsSpreadAndEachBookHasOneWriter(t *testing.T) {
	leaseNS := env.Namespace(t)
	var namespaces []string
	for i := range 4 * shards {
		namespaces = append(namespaces, fmt.Sprintf("spread-team-%02d", i))
	}
	env.NamedNamespaces(t, namespaces...)
	replicas := startReplicas(t, leaseNS, "spread", 3)
	holders := env.WaitForShardHolders(t, leaseNS, "spread", shards, replicas...)

	all := createBooks(t, namespaces, 5, "v1")
	books := booksByShard(all)
	waitConverged(t, books, "v1")
	for i, r := range holders {
		waitCachesHoldShard(t, r, i)
		families := framework.Scrape(t, r.MetricsAddr)
		if held, err := framework.MetricValue(families, "book_controller_shards_held"); err != nil || held != 1 {
			t.Errorf("%s: book_controller_shards_held %v (%v), want 1", r.Name, held, err)
		}
		if code, _, err := framework.HTTPGet(r.ProbeAddr, "/readyz"); err != nil || code != 200 {
			t.Errorf("%s: /readyz %d (%v), want 200", r.Name, code, err)
		}
	}
	relabelAndWaitForRepair(t, books)

	byShard := framework.BooksByShard(all, shards)
	env.CheckShardLeaderships(t, leaseNS, "spread", byShard, framework.TestLeaderTimings.RenewDeadline)
	checkOneWriterPerShard(t, env.AuditLog(t), byShard, holders)
}

// relabelAndWaitForRepair strips the bucket label from a ConfigMap of
// shard 0 and labels one of shard 1 with a bucket of shard 2, then waits
// until both carry their Book's bucket again.
func relabelAndWaitForRepair(t *testing.T, books [][]*webappv2.Book) {
	t.Helper()
	stripped, moved := books[0][0], books[1][0]
	patch := func(b *webappv2.Book, value string) {
		body := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, shard.BucketLabel, value)
		if _, err := env.Kube.CoreV1().ConfigMaps(b.Namespace).Patch(context.Background(), b.Name,
			types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatalf("relabelling ConfigMap %s/%s: %v", b.Namespace, b.Name, err)
		}
	}
	patch(stripped, "null")
	patch(moved, fmt.Sprintf("%q", shard.BucketName(shard.Equal(shards)[2].First)))
	for _, b := range []*webappv2.Book{stripped, moved} {
		want := shard.BucketName(shard.BucketOf(b.UID))
		env.WaitForConfigMap(t, b.Namespace, b.Name, "with bucket label "+want, func(cm *corev1.ConfigMap) bool {
			return cm.Labels[shard.BucketLabel] == want
		})
	}
}

// checkOneWriterPerShard: every controller write concerning shard i's
// Books is by holders[i], and each Book's status and ConfigMap were
// written.
func checkOneWriterPerShard(t *testing.T, events []auditv1.Event, byShard [][]string, holders []*framework.Replica) {
	t.Helper()
	for i := range byShard {
		written := map[string]bool{} // Book or ConfigMap
		for _, w := range framework.ShardWrites(events, byShard[i]) {
			kind, _, _ := strings.Cut(w.Resource, "/") // books/status is the Book
			if kind == "books" || kind == "configmaps" {
				written[kind+" "+w.Object] = true
			}
			if w.Writer != holders[i].Identity {
				t.Errorf("shard %d, held by %s: written by %s: %s", i, holders[i].Name, w.Writer, w)
			}
		}
		if len(written) != 2*len(byShard[i]) { // each Book's status and its ConfigMap
			t.Errorf("shard %d: %d objects written, want %d", i, len(written), 2*len(byShard[i]))
		}
	}
}

// TestShardsMoveOnScaleDownAndBack: scaling 3 replicas to 2 (a graceful
// stop) moves the stopped replica's shard to a survivor within a lease
// duration and a few seconds; the Books of that shard keep converging,
// changes made meanwhile included; a replica added back is a spare that
// caches nothing; no Book is lost, none of its ConfigMaps created twice,
// and no two replicas wrote a shard at once.
func TestShardsMoveOnScaleDownAndBack(t *testing.T) {
	leaseNS := env.Namespace(t)
	namespaces := []string{"scale-0", "scale-1", "scale-2", "scale-3", "scale-4", "scale-5"}
	env.NamedNamespaces(t, namespaces...)
	replicas := startReplicas(t, leaseNS, "scale", 3)
	holders := env.WaitForShardHolders(t, leaseNS, "scale", shards, replicas...)
	all := createBooks(t, namespaces, 4, "v1")
	books := booksByShard(all)
	waitConverged(t, books, "v1")

	// Scale down: the holder of shard 1 is stopped as a Deployment would.
	gone := holders[1]
	if err := gone.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code, err := gone.Wait(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("%s after SIGTERM: exit %d (%v), want 0", gone.Name, code, err)
	}
	stopped := time.Now()
	updateBooks(t, books[1], "v2")
	survivors := without(replicas, gone)
	moved := env.WaitForShardHolders(t, leaseNS, "scale", shards, survivors...)
	// A survivor holds a shard already, so it takes a free one only once
	// it has been free for a lease duration.
	framework.ExpectTakeover(t, "shard 1 moved to "+moved[1].Name+" after a scale-down", stopped, time.Now(), framework.TestLeaderTimings.LeaseDuration)
	waitConverged(t, books, "v1", 0, 2)
	waitConverged(t, books, "v2", 1)

	// Scale back up: the new replica finds every shard held and stands by.
	back := env.StartReplica(t, binary, "scale-back", framework.ReplicaOptions{Namespace: leaseNS, LeaseID: "scale", Shards: shards})
	framework.Eventually(t, "the replica added back to be ready", framework.AnswersOK(back.ProbeAddr, "/readyz"))
	if h := env.ShardHolders(context.Background(), leaseNS, "scale", shards); strings.Contains(strings.Join(h, ","), back.Identity) {
		t.Errorf("the replica added back took a shard that was held: %v", h)
	}
	families := framework.Scrape(t, back.MetricsAddr)
	if held, err := framework.MetricValue(families, "book_controller_shards_held"); err != nil || held != 0 {
		t.Errorf("the spare: book_controller_shards_held %v (%v), want 0", held, err)
	}
	if _, ok := families["book_controller_cached_books"]; ok {
		t.Errorf("the spare exports book_controller_cached_books: it must cache nothing")
	}
	updateBooks(t, books[1], "v3")
	waitConverged(t, books, "v3", 1)

	byShard := framework.BooksByShard(all, shards)
	env.CheckShardLeaderships(t, leaseNS, "scale", byShard, framework.TestLeaderTimings.RenewDeadline)
	checkCreatedOnce(t, env.AuditLog(t), all)
}

// checkCreatedOnce: the audit log shows one successful create of each
// Book's ConfigMap.
func checkCreatedOnce(t *testing.T, events []auditv1.Event, books []*webappv2.Book) {
	t.Helper()
	var keys []string
	for _, b := range books {
		keys = append(keys, b.Namespace+"/"+b.Name)
	}
	creates := map[string]int{}
	for _, w := range framework.ShardWrites(events, keys) {
		if w.Resource == "configmaps" && w.Verb == "create" && w.Code == 201 {
			creates[w.Object]++
		}
	}
	for _, key := range keys {
		if n := creates[key]; n != 1 {
			t.Errorf("ConfigMap %s created %d times, want once", key, n)
		}
	}
}

func startReplicas(t *testing.T, leaseNS, leaseID string, n int) []*framework.Replica {
	t.Helper()
	var out []*framework.Replica
	for k := range n {
		out = append(out, env.StartReplica(t, binary, fmt.Sprintf("%s-%d", leaseID, k),
			framework.ReplicaOptions{Namespace: leaseNS, LeaseID: leaseID, Shards: shards}))
	}
	return out
}

func without(rs []*framework.Replica, gone *framework.Replica) []*framework.Replica {
	var out []*framework.Replica
	for _, r := range rs {
		if r != gone {
			out = append(out, r)
		}
	}
	return out
}

// createBooks creates perNS Books with the title in every namespace and
// returns them.
func createBooks(t *testing.T, namespaces []string, perNS int, title string) []*webappv2.Book {
	t.Helper()
	return createBooksNamed(t, namespaces, perNS, "b", title)
}

// createBooksNamed is createBooks with the Books named after prefix
// (framework.BookName).
func createBooksNamed(t *testing.T, namespaces []string, perNS int, prefix, title string) []*webappv2.Book {
	t.Helper()
	var books []*webappv2.Book
	for _, ns := range namespaces {
		for _, b := range framework.NumberedBooks(ns, prefix, perNS) {
			b.Spec.Title = title
			books = append(books, b)
		}
	}
	return env.CreateAll(t, books)
}

// booksByShard groups Books by the shard, of shards, their UIDs put them in.
func booksByShard(books []*webappv2.Book) [][]*webappv2.Book {
	out := make([][]*webappv2.Book, shards)
	for _, b := range books {
		i := shard.Of(b.UID, shards)
		out[i] = append(out[i], b)
	}
	return out
}

// waitCachesHoldShard waits until replica r, holding shard i of shards,
// caches exactly the Books of the cluster whose UIDs hash into shard i,
// and the ConfigMaps labelled with its buckets (other tests' Books still
// being deleted included), and returns how many of each.
func waitCachesHoldShard(t *testing.T, r *framework.Replica, i int) (books, configMaps float64) {
	t.Helper()
	s := shard.Equal(shards)[i]
	framework.Eventually(t, fmt.Sprintf("%s to cache the Books and ConfigMaps of shard %d alone", r.Name, i), func(ctx context.Context) error {
		bookList, err := env.Books.WebappV2().Books(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		cmList, err := env.Kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx,
			metav1.ListOptions{LabelSelector: s.ConfigMapSelector(controller.ManagedBySelector)})
		if err != nil {
			return err
		}
		wantBooks := 0
		for _, b := range bookList.Items {
			if s.Holds(b.UID) {
				wantBooks++
			}
		}
		families, err := framework.ScrapeMetrics(r.MetricsAddr)
		if err != nil {
			return err
		}
		books, _ = framework.MetricValue(families, "book_controller_cached_books", "shard", fmt.Sprint(i))
		configMaps, _ = framework.MetricValue(families, "book_controller_cached_configmaps", "shard", fmt.Sprint(i))
		return poll.Done(books == float64(wantBooks) && configMaps == float64(len(cmList.Items)),
			"cached %v Books and %v ConfigMaps; the shard has %d and %d", books, configMaps, wantBooks, len(cmList.Items))
	})
	return books, configMaps
}

// updateBooks sets the title of every Book given.
func updateBooks(t *testing.T, books []*webappv2.Book, title string) {
	t.Helper()
	for _, b := range books {
		patch := fmt.Sprintf(`{"spec":{"title":%q}}`, title)
		if _, err := env.Books.WebappV2().Books(b.Namespace).Patch(context.Background(), b.Name, "application/merge-patch+json",
			[]byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("updating %s/%s: %v", b.Namespace, b.Name, err)
		}
	}
}

// waitConverged waits until every Book of the given shards (all if none
// given) has a ConfigMap with the title and a Ready status for its
// generation.
func waitConverged(t *testing.T, books [][]*webappv2.Book, title string, onlyShards ...int) {
	t.Helper()
	for i, shardBooks := range books {
		if len(onlyShards) > 0 && !contains(onlyShards, i) {
			continue
		}
		for _, b := range shardBooks {
			env.WaitForConfigMap(t, b.Namespace, b.Name, "with title "+title, func(cm *corev1.ConfigMap) bool {
				return cm.Data[controller.TitleKey] == title
			})
			env.WaitForReady(t, b.Namespace, b.Name, metav1.ConditionTrue, "ConfigMapReady")
		}
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestShardsNeedTheFeatureGate: against an API server without the
// ShardedListAndWatch feature gate, which would send every replica every
// Book, --shards 3 refuses to start, with one line naming the gate.
func TestShardsNeedTheFeatureGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{BinDir: env.Cluster.BinDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	if err := framework.InstallCRD(ctx, apiextensionsclient.NewForConfigOrDie(cluster.RESTConfig())); err != nil {
		t.Fatal(err)
	}
	p := framework.StartProcess(t, "no-gate", binary, "--kubeconfig", cluster.KubeconfigPath(), "--shards", "3",
		"--leader-elect", "--leader-elect-namespace", "default", "--health-probe-bind-address", "0")
	code, err := p.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	out := strings.TrimSpace(p.Output())
	if code != 1 || strings.Count(out, "\n") != 0 || !strings.Contains(out, "--feature-gates=ShardedListAndWatch=true") {
		t.Errorf("exit %d, output:\n%s\nwant exit 1 and one line naming the ShardedListAndWatch feature gate", code, out)
	}
}

// TestShardsInProcess runs two sharded managers in this test process, so
// that `make test`'s race detector sees the sharded code paths: both serve
// a shard each of one namespace's Books (--namespace with --shards);
// one stopped gracefully releases its shard and the other takes it a lease
// duration later and serves its Books; both Runs return nil on a graceful
// stop.
func TestShardsInProcess(t *testing.T) {
	const n = 2
	leaseNS := env.Namespace(t)
	ns := env.Namespace(t)
	le := func(identity string) manager.LeaderElection {
		lt := framework.TestLeaderTimings
		return manager.LeaderElection{Enabled: true, Namespace: leaseNS, ID: "inproc", Identity: identity,
			LeaseDuration: lt.LeaseDuration, RenewDeadline: lt.RenewDeadline, RetryPeriod: lt.RetryPeriod}
	}
	a := env.StartController(t, framework.ControllerOptions{RESTConfig: env.RESTConfig(), Namespace: ns, Shards: n, LeaderElection: le("inproc-a")})
	framework.Eventually(t, "inproc-a to hold a shard", func(ctx context.Context) error {
		h := env.ShardHolders(ctx, leaseNS, "inproc", n)
		return poll.Done(slices.Contains(h, "inproc-a"), "shard holders %q", h)
	})
	env.StartController(t, framework.ControllerOptions{RESTConfig: env.RESTConfig(), Namespace: ns, Shards: n, LeaderElection: le("inproc-b")})
	framework.Eventually(t, "a shard each", func(ctx context.Context) error {
		h := env.ShardHolders(ctx, leaseNS, "inproc", n)
		return poll.Done(slices.Contains(h, "inproc-a") && slices.Contains(h, "inproc-b"), "shard holders %q", h)
	})
	all := createBooks(t, []string{ns}, 10, "v1")
	books := [][]*webappv2.Book{all}
	waitConverged(t, books, "v1")

	if err := a.Stop(); err != nil {
		t.Fatalf("a graceful stop of a sharded manager: %v, want nil", err)
	}
	framework.Eventually(t, "inproc-b to hold both shards", func(ctx context.Context) error {
		h := env.ShardHolders(ctx, leaseNS, "inproc", n)
		return poll.Done(h[0] == "inproc-b" && h[1] == "inproc-b", "shard holders %q", h)
	})
	updateBooks(t, all, "v2")
	waitConverged(t, books, "v2")
	env.CheckShardLeaderships(t, leaseNS, "inproc", framework.BooksByShard(all, n), framework.TestLeaderTimings.RenewDeadline)
}
