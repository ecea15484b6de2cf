//go:build linux

package sharding_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/shard"
	"ydzs.io/book-controller/test/integration/framework"
)

const shards = 3

// TestShardsSpreadAndEachBookHasOneWriter: three replicas with --shards 3
// take a shard each; every Book becomes Ready; the audit log shows every
// write to a shard's namespaces made by the holder of its Lease, while it
// held it, and each Book written by one replica only; each replica caches
// the Books of its shard and no other. The namespaces are named alike
// (spread-team-00 …), which equal hash ranges put in one shard: the
// replicas get --shard-boundaries balanced over them.
func TestShardsSpreadAndEachBookHasOneWriter(t *testing.T) {
	leaseNS := env.Namespace(t)
	weights := map[string]int{}
	for i := range 4 * shards {
		ns := fmt.Sprintf("spread-team-%02d", i)
		if _, err := env.Kube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		weights[ns] = 1
	}
	boundaries := shard.BalancedBoundaries(weights, shards)
	ranges, err := shard.At(boundaries)
	if err != nil {
		t.Fatal(err)
	}
	byShard := make([][]string, shards)
	equal := map[int]bool{}
	for ns := range weights {
		i := shard.In(ns, ranges)
		byShard[i] = append(byShard[i], ns)
		equal[shard.Of(ns, shards)] = true
	}
	if len(equal) != 1 {
		t.Logf("equal ranges would spread these namespaces over %d shards too", len(equal))
	}
	var replicas []*framework.Replica
	for k := range 3 {
		replicas = append(replicas, env.StartReplica(t, binary, fmt.Sprintf("spread-%d", k), framework.ReplicaOptions{
			Namespace: leaseNS, LeaseID: "spread", Shards: shards,
			Args: []string{"--shard-boundaries=" + strings.Join(boundaries, ",")}}))
	}
	holders := env.WaitForShardHolders(t, leaseNS, "spread", shards, replicas...)

	books := createBooks(t, byShard, 5, "v1")
	waitConverged(t, books, "v1")

	for i, r := range holders {
		want := float64(len(books[i]))
		framework.Eventually(t, fmt.Sprintf("%s to cache the %v Books of shard %d alone", r.Name, want, i), func(context.Context) error {
			got, err := framework.CachedBooks(r.MetricsAddr)
			if err != nil {
				return err
			}
			return poll.Done(got == want, "book_controller_cached_books %v", got)
		})
		families := framework.Scrape(t, r.MetricsAddr)
		if held, err := framework.MetricValue(families, "book_controller_shards_held"); err != nil || held != 1 {
			t.Errorf("%s: book_controller_shards_held %v (%v), want 1", r.Name, held, err)
		}
		if n, err := framework.MetricValue(families, "book_controller_cached_books", "shard", fmt.Sprint(i)); err != nil || n != want {
			t.Errorf("%s: book_controller_cached_books{shard=%q} %v (%v), want %v", r.Name, fmt.Sprint(i), n, err, want)
		}
		if code, _, err := framework.HTTPGet(r.ProbeAddr, "/readyz"); err != nil || code != 200 {
			t.Errorf("%s: /readyz %d (%v), want 200", r.Name, code, err)
		}
	}

	env.CheckShardLeaderships(t, leaseNS, "spread", byShard, framework.TestLeaderTimings.RenewDeadline)
	events := env.AuditLog(t)
	for i := range shards {
		writers := map[string]map[string]bool{} // Book or ConfigMap → writers
		for _, w := range framework.ShardWrites(events, byShard[i]) {
			kind, _, _ := strings.Cut(w.Resource, "/") // books/status is the Book
			if kind != "books" && kind != "configmaps" {
				continue
			}
			if writers[kind+" "+w.Object] == nil {
				writers[kind+" "+w.Object] = map[string]bool{}
			}
			writers[kind+" "+w.Object][w.Writer] = true
			if w.Writer != holders[i].Identity {
				t.Errorf("shard %d, held by %s: written by %s: %s", i, holders[i].Name, w.Writer, w)
			}
		}
		if len(writers) != 2*len(books[i]) { // each Book's status and its ConfigMap
			t.Errorf("shard %d: %d objects written, want %d", i, len(writers), 2*len(books[i]))
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
	byShard := env.ShardedNamespaces(t, "scale", shards, 2)
	replicas := startReplicas(t, leaseNS, "scale", 3)
	holders := env.WaitForShardHolders(t, leaseNS, "scale", shards, replicas...)
	books := createBooks(t, byShard, 4, "v1")
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
	// it has been free for a lease duration (4 s); the 5 s more cover the
	// retry period and a loaded machine.
	if took := time.Since(stopped); took > framework.TestLeaderTimings.LeaseDuration+5*time.Second {
		t.Errorf("shard 1 moved to %s after %v, want within the lease duration + 5 s", moved[1].Name, took)
	}
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

	env.CheckShardLeaderships(t, leaseNS, "scale", byShard, framework.TestLeaderTimings.RenewDeadline)
	creates := map[string]int{}
	for _, w := range framework.ShardWrites(env.AuditLog(t), slices.Concat(byShard...)) {
		if w.Resource == "configmaps" && w.Verb == "create" && w.Code == 201 {
			creates[w.Object]++
		}
	}
	for _, shardBooks := range books {
		for _, b := range shardBooks {
			if n := creates[b.Namespace+"/"+b.Name]; n != 1 {
				t.Errorf("ConfigMap %s/%s created %d times, want once", b.Namespace, b.Name, n)
			}
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

// createBooks creates perNS Books with the title in every namespace, in
// parallel, and returns them by shard.
func createBooks(t *testing.T, byShard [][]string, perNS int, title string) [][]*webappv1.Book {
	t.Helper()
	out := make([][]*webappv1.Book, len(byShard))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, nss := range byShard {
		for _, ns := range nss {
			wg.Go(func() {
				for k := range perNS {
					b, err := env.Books.WebappV1().Books(ns).Create(context.Background(),
						framework.NewBook(ns, fmt.Sprintf("b-%d", k), title, int32(k)), metav1.CreateOptions{})
					if err != nil {
						t.Errorf("creating a Book in %s: %v", ns, err)
						return
					}
					mu.Lock()
					out[i] = append(out[i], b)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return out
}

// updateBooks sets the title of every Book given.
func updateBooks(t *testing.T, books []*webappv1.Book, title string) {
	t.Helper()
	for _, b := range books {
		patch := fmt.Sprintf(`{"spec":{"title":%q}}`, title)
		if _, err := env.Books.WebappV1().Books(b.Namespace).Patch(context.Background(), b.Name, "application/merge-patch+json",
			[]byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("updating %s/%s: %v", b.Namespace, b.Name, err)
		}
	}
}

// waitConverged waits until every Book of the given shards (all if none
// given) has a ConfigMap with the title and a Ready status for its
// generation.
func waitConverged(t *testing.T, books [][]*webappv1.Book, title string, onlyShards ...int) {
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
// a shard each; one stopped gracefully releases its shard and the other
// takes it a lease duration later and serves its Books; both Runs return
// nil on a graceful stop.
func TestShardsInProcess(t *testing.T) {
	const n = 2
	leaseNS := env.Namespace(t)
	byShard := env.ShardedNamespaces(t, "inproc", n, 1)
	le := func(identity string) manager.LeaderElection {
		lt := framework.TestLeaderTimings
		return manager.LeaderElection{Enabled: true, Namespace: leaseNS, ID: "inproc", Identity: identity,
			LeaseDuration: lt.LeaseDuration, RenewDeadline: lt.RenewDeadline, RetryPeriod: lt.RetryPeriod}
	}
	a := env.StartController(t, framework.ControllerOptions{RESTConfig: env.RESTConfig(), Shards: n, LeaderElection: le("inproc-a")})
	framework.Eventually(t, "inproc-a to hold a shard", func(ctx context.Context) error {
		h := env.ShardHolders(ctx, leaseNS, "inproc", n)
		return poll.Done(slices.Contains(h, "inproc-a"), "shard holders %q", h)
	})
	env.StartController(t, framework.ControllerOptions{RESTConfig: env.RESTConfig(), Shards: n, LeaderElection: le("inproc-b")})
	framework.Eventually(t, "a shard each", func(ctx context.Context) error {
		h := env.ShardHolders(ctx, leaseNS, "inproc", n)
		return poll.Done(slices.Contains(h, "inproc-a") && slices.Contains(h, "inproc-b"), "shard holders %q", h)
	})
	books := createBooks(t, byShard, 3, "v1")
	waitConverged(t, books, "v1")

	if err := a.Stop(); err != nil {
		t.Fatalf("a graceful stop of a sharded manager: %v, want nil", err)
	}
	framework.Eventually(t, "inproc-b to hold both shards", func(ctx context.Context) error {
		h := env.ShardHolders(ctx, leaseNS, "inproc", n)
		return poll.Done(h[0] == "inproc-b" && h[1] == "inproc-b", "shard holders %q", h)
	})
	updateBooks(t, slices.Concat(books...), "v2")
	waitConverged(t, books, "v2")
	env.CheckShardLeaderships(t, leaseNS, "inproc", byShard, framework.TestLeaderTimings.RenewDeadline)
}
