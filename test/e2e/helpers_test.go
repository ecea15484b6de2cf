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
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/test/integration/framework"
)

// What manifests/ deploys.
const (
	systemNS   = "book-controller-system"
	deployName = "book-controller"
	leaseName  = "book-controller"
	podLabels  = "app.kubernetes.io/name=book-controller,app.kubernetes.io/component=controller"
	saUser     = "system:serviceaccount:" + systemNS + ":book-controller"
	// leaseDuration is the controller's default --leader-elect-lease-duration.
	leaseDuration = 15 * time.Second
	// podWait bounds waits on pods: a pull, a start, probes at their period.
	podWait = 3 * time.Minute
)

// image is what make image-push pushes and make deploy runs.
var image = localcluster.RegistryHost + "/book-controller:e2e"

// run runs a command in the repository root against the test's cluster and
// fails the test with its output if it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.KubeconfigPath())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s (%s):\n%s", name, strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond), tail(out.String(), 15))
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, env.Kubectl(t), args...)
}

// controllerPods are the Deployment's pods that are not being deleted.
func controllerPods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := env.Kube.CoreV1().Pods(systemNS).List(context.Background(), metav1.ListOptions{LabelSelector: podLabels})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitRolledOut waits until the Deployment's pods are exactly replicas
// pods of its current template, every one Ready (the kubelet's readiness
// probe) and none left from an older one.
func waitRolledOut(t *testing.T, replicas int32) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	poll.Eventually(t, fmt.Sprintf("the Deployment to run %d Ready pods of its current template", replicas), 500*time.Millisecond, podWait, func(ctx context.Context) error {
		d, err := env.Kube.AppsV1().Deployments(systemNS).Get(ctx, deployName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		all, err := env.Kube.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: podLabels})
		if err != nil {
			return err
		}
		pods = all.Items
		s := d.Status
		done := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == replicas && s.ReadyReplicas == replicas &&
			s.AvailableReplicas == replicas && int32(len(pods)) == replicas && allReady(pods)
		return poll.Done(done, "%s; pods: %s", describeDeployment(d), describePods(pods))
	})
	return pods
}

func describeDeployment(d *appsv1.Deployment) string {
	s := d.Status
	return fmt.Sprintf("generation %d observed %d, %d updated, %d ready, %d available", d.Generation, s.ObservedGeneration,
		s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
}

func allReady(pods []corev1.Pod) bool {
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !podReady(&p) {
			return false
		}
	}
	return true
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describePods(pods []corev1.Pod) string {
	var parts []string
	for _, p := range pods {
		s := fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, podReady(&p))
		for _, cs := range p.Status.ContainerStatuses {
			s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				s += " waiting:" + w.Reason
			}
		}
		if p.DeletionTimestamp != nil {
			s += " terminating"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// leaseHolder is the Lease's holder identity, "<pod name>_<uuid>".
func leaseHolder(t *testing.T) string {
	t.Helper()
	l, err := env.Kube.CoordinationV1().Leases(systemNS).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// holderPod is the pod name in a holder identity.
func holderPod(identity string) string {
	pod, _, _ := strings.Cut(identity, "_")
	return pod
}

// waitLeaderAmong waits until the Lease is held by one of pods and returns
// the holder's pod.
func waitLeaderAmong(t *testing.T, pods []corev1.Pod, timeout time.Duration) corev1.Pod {
	t.Helper()
	var leader corev1.Pod
	poll.Eventually(t, "one of "+describePods(pods)+" to hold the Lease", 100*time.Millisecond, timeout, func(context.Context) error {
		h := leaseHolder(t)
		for _, p := range pods {
			if holderPod(h) == p.Name {
				leader = p
				return nil
			}
		}
		return fmt.Errorf("held by %q", h)
	})
	return leader
}

// containerPid is the host pid of the pod's controller container, from
// the node's cgroups: what the checks of /proc read.
func containerPid(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].ContainerID == "" {
		t.Fatalf("pod %s has no container ID yet", p.Name)
	}
	pids, err := localcluster.ContainerPids(string(p.UID), p.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 {
		t.Fatalf("pod %s's container runs %d processes %v, want the controller alone", p.Name, len(pids), pids)
	}
	return pids[0]
}

// procStatus parses /proc/<pid>/status into its fields.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return fields
}

// rssMiB is a process's resident set, its anonymous part (the Go heap and
// stacks: what a memory limit cannot reclaim, unlike the binary's pages)
// and its peak, in MiB.
func rssMiB(t *testing.T, pid int) (rss, anon, peak float64) {
	t.Helper()
	st := procStatus(t, pid)
	kb := func(key string) float64 {
		v, err := strconv.ParseFloat(strings.TrimSuffix(st[key], " kB"), 64)
		if err != nil {
			t.Fatalf("/proc/%d/status %s = %q", pid, key, st[key])
		}
		return v / 1024
	}
	return kb("VmRSS"), kb("RssAnon"), kb("VmHWM")
}

// createBooks creates n Books in ns named prefix-00000 on, CreateWidth at
// a time (framework.CreateBooks): faster, on a 2-core machine, starves the
// API server that the controller's Lease renewals go through, and the
// replicas lose their leadership instead of syncing.
func createBooks(t *testing.T, ns, prefix string, n int) {
	t.Helper()
	env.CreateBooks(t, ns, prefix, n)
}

// waitBooksReady waits until ns holds want Books, all Ready for their
// generation.
func waitBooksReady(t *testing.T, ns string, want int, timeout time.Duration) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("%d Books in %s to be Ready", want, ns), 500*time.Millisecond, timeout, env.BooksReady(ns, want))
}
