//go:build e2e && linux

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

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/test/integration/framework"
)

// watchReady checks every Book in ns is Ready, over and over, until stop
// is closed, and returns what it saw not Ready. A List that fails counts
// against it: an outage of the API server is no proof that all is Ready.
func watchReady(ns string, stop <-chan struct{}) func() []string {
	var mu sync.Mutex
	var bad []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			names, _, err := env.NotReady(context.Background(), ns)
			switch {
			case err != nil:
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
				mu.Unlock()
			case len(names) > 0:
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), names))
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return bad
	}
}

// configMapCreates counts the controller's successful creates of each
// ConfigMap in ns in the audit log (kube-root-ca.crt is the controller
// manager's).
func configMapCreates(t *testing.T, ns string) map[string]int {
	t.Helper()
	creates := map[string]int{}
	for _, e := range env.AuditLog(t) {
		ref := e.ObjectRef
		if ref != nil && ref.Namespace == ns && ref.Resource == "configmaps" && e.Verb == "create" && e.User.Username == saUser &&
			e.ResponseStatus != nil && e.ResponseStatus.Code == 201 {
			creates[ref.Name]++
		}
	}
	return creates
}

func testRolloutRestart(t *testing.T) {
	before := waitRolledOut(t, 2)
	oldLeader := waitLeaderAmong(t, before, 2*leaseDuration)
	ns := env.Namespace(t)
	const n = 50
	createBooks(t, ns, "rollout", n)
	waitBooksReady(t, ns, n, framework.Timeout)
	stop := make(chan struct{})
	seen := watchReady(ns, stop)
	kubectl(t, "rollout", "restart", "-n", systemNS, "deployment/"+deployName)
	kubectl(t, "rollout", "status", "-n", systemNS, "deployment/"+deployName, "--timeout=180s")
	after := waitRolledOut(t, 2)
	newLeader := waitLeaderAmong(t, after, 2*leaseDuration)
	close(stop)
	if bad := seen(); len(bad) > 0 {
		t.Errorf("Books not Ready during the rollout: %v", bad)
	}
	for _, p := range after {
		for _, old := range before {
			if p.Name == old.Name {
				t.Errorf("pod %s survived the rollout restart", p.Name)
			}
		}
	}
	t.Logf("Lease: %s before, %s after", oldLeader.Name, newLeader.Name)
	creates := configMapCreates(t, ns)
	if len(creates) != n {
		t.Errorf("%d ConfigMaps created in %s, want %d", len(creates), ns, n)
	}
	for name, count := range creates {
		if count != 1 {
			t.Errorf("ConfigMap %s/%s created %d times", ns, name, count)
		}
	}
}

// lastTermination watches pod until it is deleted and returns the last
// terminated state its container was reported in.
func lastTermination(ctx context.Context, pod string) (<-chan *corev1.ContainerStateTerminated, error) {
	w, err := env.Kube.CoreV1().Pods(systemNS).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod).String()})
	if err != nil {
		return nil, err
	}
	out := make(chan *corev1.ContainerStateTerminated, 1)
	go func() {
		defer w.Stop()
		var last *corev1.ContainerStateTerminated
		defer func() { out <- last }()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Terminated != nil {
					last = cs.State.Terminated
				}
			}
			if ev.Type == "DELETED" {
				return
			}
		}
	}()
	return out, nil
}

func testDeleteLeader(t *testing.T) {
	pods := waitRolledOut(t, 2)
	leader := waitLeaderAmong(t, pods, 2*leaseDuration)
	grace := time.Duration(*leader.Spec.TerminationGracePeriodSeconds) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), grace+time.Minute)
	defer cancel()
	term, err := lastTermination(ctx, leader.Name)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := env.Kube.CoreV1().Pods(systemNS).Delete(ctx, leader.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The other replica, or the one the ReplicaSet starts in place of the
	// deleted pod: whichever asks first once the Lease is released.
	var next string
	poll.Eventually(t, "another pod to hold the Lease", 100*time.Millisecond, framework.Timeout, func(context.Context) error {
		next = holderPod(leaseHolder(t))
		return poll.Done(next != "" && next != leader.Name, "held by %q", next)
	})
	took := framework.ExpectTakeover(t, "after the leader pod's deletion", deleted, time.Now(), leaseDuration)
	standby := "the standby"
	if next != otherPod(pods, leader.Name) {
		standby = "the pod started in its place"
	}
	t.Logf("%s (%s) took the Lease over %s after %s was deleted", next, standby, took.Round(10*time.Millisecond), leader.Name)
	st := <-term
	switch {
	case st == nil:
		t.Errorf("pod %s was deleted without a terminated state reported", leader.Name)
	case st.ExitCode != 0:
		t.Errorf("pod %s's controller exited %d (%s), want 0", leader.Name, st.ExitCode, st.Reason)
	case st.FinishedAt.Time.Sub(deleted) > grace:
		t.Errorf("pod %s's controller exited %s after deletion, beyond its %s grace period", leader.Name, st.FinishedAt.Sub(deleted), grace)
	default:
		// FinishedAt has a resolution of one second.
		t.Logf("pod %s's controller exited 0 at most %s after its deletion (grace %s)", leader.Name, max(0, st.FinishedAt.Sub(deleted)+time.Second).Round(time.Second), grace)
	}
	waitRolledOut(t, 2)
}

func otherPod(pods []corev1.Pod, name string) string {
	for _, p := range pods {
		if p.Name != name {
			return p.Name
		}
	}
	return ""
}

// setMemory sets the controller's memory request and limit.
func setMemory(t *testing.T, request, limit string) {
	t.Helper()
	kubectl(t, "set", "resources", "-n", systemNS, "deployment/"+deployName, "--requests=memory="+request, "--limits=memory="+limit)
}

func scale(t *testing.T, replicas int) {
	t.Helper()
	kubectl(t, "scale", "-n", systemNS, "deployment/"+deployName, fmt.Sprintf("--replicas=%d", replicas))
}

// memory is the controller's memory in every running pod, in MiB.
type memory struct{ rss, anon, peak []float64 }

func residentSet(t *testing.T) memory {
	t.Helper()
	var m memory
	for _, p := range waitRolledOut(t, 2) {
		r, a, h := rssMiB(t, containerPid(t, &p))
		m.rss, m.anon, m.peak = append(m.rss, r), append(m.anon, a), append(m.peak, h)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func testOOM(t *testing.T) {
	// The manifests request 10m CPU, a cgroup weight of about 1% of any
	// process outside the node: on a 2-core machine that others load
	// heavily, the burst of 10,000 Books then starves the replicas until
	// the leader misses its renew deadline and exits, and the phase
	// measures crash-loop back-off instead of memory. This phase is about
	// memory; it gives the pods the CPU weight and quota of a real
	// deployment's, and every memory figure and limit below is unchanged.
	kubectl(t, "set", "resources", "-n", systemNS, "deployment/"+deployName, "--requests=cpu=500m", "--limits=cpu=1")
	m0 := residentSet(t)
	ns := env.Namespace(t)
	const n = 10000
	start := time.Now()
	createBooks(t, ns, "oom", n)
	waitBooksReady(t, ns, n, 10*time.Minute)
	t.Logf("%d Books created and Ready in %s", n, time.Since(start).Round(time.Second))
	m1 := residentSet(t)
	grown, grownAnon := maxOf(m1.rss)-maxOf(m0.rss), maxOf(m1.anon)-maxOf(m0.anon)
	t.Logf("sizing: RSS %.0f MiB (anonymous %.0f) with no Books of this test, %.0f MiB (anonymous %.0f) with %d: %.0f MiB (anonymous %.0f) per 10,000 Books",
		maxOf(m0.rss), maxOf(m0.anon), maxOf(m1.rss), maxOf(m1.anon), n, grown*10000/n, grownAnon*10000/n)

	// A limit that holds the process without the Books but not with them:
	// the binary's pages can be reclaimed, the heap cannot.
	small := fmt.Sprintf("%dMi", int(maxOf(m0.anon)+grownAnon/2))
	scale(t, 0)
	poll.Eventually(t, "the controller's pods to be gone", 500*time.Millisecond, podWait, func(context.Context) error {
		return poll.Done(len(controllerPods(t)) == 0, "%s", describePods(controllerPods(t)))
	})
	setMemory(t, small, small)
	scale(t, 2)
	waitOOMKilled(t)
	createBooks(t, ns, "while-oom", 100)

	setMemory(t, "64Mi", "256Mi")
	start = time.Now()
	waitRolledOut(t, 2)
	waitBooksReady(t, ns, n+100, 5*time.Minute)
	m2 := residentSet(t)
	t.Logf("limit raised: %d Books Ready %s later; peak RSS of the new pods, which listed them at start: %.0f MiB",
		n+100, time.Since(start).Round(time.Second), maxOf(m2.peak))
	sizing{Books: n, IdleRSS: m0.rss, IdleAnon: m0.anon, RSS: m1.rss, Anon: m1.anon,
		PerTenThousand: grown * 10000 / n, PerTenThousandAnon: grownAnon * 10000 / n,
		OOMLimit: small, PeakAtStart: m2.peak}.write(t)
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cms.Items) - 1; got != n+100 { // kube-root-ca.crt besides the Books'
		t.Errorf("%d ConfigMaps of Books in %s, want %d", got, ns, n+100)
	}
}

// waitOOMKilled waits until a controller container was OOM-killed and the
// kubelet restarted it.
func waitOOMKilled(t *testing.T) {
	t.Helper()
	poll.Eventually(t, "a controller container to be OOM-killed and restarted", time.Second, podWait, func(context.Context) error {
		pods := controllerPods(t)
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				if term := cs.LastTerminationState.Terminated; term != nil && term.Reason == "OOMKilled" && cs.RestartCount > 0 {
					t.Logf("pod %s: OOMKilled (exit %d), restarted %d times", p.Name, term.ExitCode, cs.RestartCount)
					return nil
				}
			}
		}
		return fmt.Errorf("%s", describePods(pods))
	})
}
