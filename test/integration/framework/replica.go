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

package framework

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ydzs.io/book-controller/internal/poll"
)

// LeaderTimings are a Lease's duration, renew deadline and retry period.
type LeaderTimings struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// TestLeaderTimings are short, so takeovers happen within seconds, and keep
// kube-controller-manager's proportions: the renew deadline leaves a second
// between the moment a lost leader stops writing and the earliest moment a
// standby may start, and a retry period fits six times into it.
var TestLeaderTimings = LeaderTimings{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}

// ReplicaOptions describe a controller process with leader election.
type ReplicaOptions struct {
	// Namespace is watched, and holds the Lease.
	Namespace string
	// LeaseID names the Lease.
	LeaseID string
	// Timings default to TestLeaderTimings.
	Timings LeaderTimings
	// ViaProxy puts a Proxy of the replica's own between it and the API
	// server, so a test can cut or slow down this replica alone.
	ViaProxy bool
	// Proxy, if set, is the one to go through: a replica restarted behind
	// the proxy of the one it replaces.
	Proxy *Proxy
	// fork:begin shards
	// Shards, above 1, runs the replica with --shards: it then watches
	// every namespace, and Namespace only holds the shard Leases, named
	// after LeaseID (<LeaseID>-shard-<i>).
	Shards int
	// fork:end shards
	// Args are more flags (-v=2, --workers...).
	Args []string
	// fork:begin v2
	// Release says the binary is an earlier release's (BuildRevision),
	// which knows only the flags it had: no --disable-layers.
	Release bool
	// fork:end v2
}

// Replica is a controller process with leader election.
type Replica struct {
	*Process
	// Identity is what the replica calls itself in the Lease and in its
	// user agent, read from its first log lines.
	Identity    string
	MetricsAddr string
	ProbeAddr   string
	// Proxy is nil unless ReplicaOptions.ViaProxy.
	Proxy *Proxy
}

var identityRE = regexp.MustCompile(`"Starting Book controller".* identity="([^"]+)"`)

// StartReplica starts the controller binary bin as a replica (as the
// cluster admin), waits until it has passed its checks and named itself,
// and returns it. It is killed at the end of the test.
func (e *Env) StartReplica(t testing.TB, bin, name string, o ReplicaOptions) *Replica {
	t.Helper()
	if o.Timings == (LeaderTimings{}) {
		o.Timings = TestLeaderTimings
	}
	r := &Replica{MetricsAddr: FreeAddr(t), ProbeAddr: FreeAddr(t)}
	kubeconfig := e.Cluster.KubeconfigPath()
	switch {
	case o.Proxy != nil:
		r.Proxy, kubeconfig = o.Proxy, e.ProxiedKubeconfig(t, t.TempDir(), name+".kubeconfig", o.Proxy)
	case o.ViaProxy:
		r.Proxy, kubeconfig = e.StartAPIServerProxy(t, t.TempDir(), name+".kubeconfig")
	}
	watch := []string{"--namespace", o.Namespace}
	// fork:begin shards
	if o.Shards > 1 {
		watch = []string{"--shards", fmt.Sprint(o.Shards)}
	}
	// fork:end shards
	args := append([]string{"--kubeconfig", kubeconfig}, watch...)
	args = append(args, []string{
		"--leader-elect", "--leader-elect-namespace", o.Namespace, "--leader-elect-id", o.LeaseID,
		"--leader-elect-lease-duration", o.Timings.LeaseDuration.String(),
		"--leader-elect-renew-deadline", o.Timings.RenewDeadline.String(),
		"--leader-elect-retry-period", o.Timings.RetryPeriod.String(),
		"--metrics-bind-address", r.MetricsAddr, "--health-probe-bind-address", r.ProbeAddr}...)
	if !o.Release { // fork:line v2
		args = append(args, LayerArgs()...)
	} // fork:line v2
	args = append(args, o.Args...)
	r.Process = StartProcess(t, name, bin, args...)
	// Look often: every test with replicas waits here for each one it starts.
	poll.Eventually(t, name+" to start and name itself", 20*time.Millisecond, Timeout, func(context.Context) error {
		for _, l := range r.Lines() {
			if m := identityRE.FindStringSubmatch(l.Text); m != nil {
				r.Identity = m[1]
				return nil
			}
		}
		if !r.Running() {
			t.Fatalf("%s exited before it named itself:\n%s", name, r.Tail(30))
		}
		return fmt.Errorf("no identity logged yet; last lines:\n%s", r.Tail(30))
	})
	return r
}

// LeaseHolder is the holder of the Lease namespace/name, "" if none.
func (e *Env) LeaseHolder(ctx context.Context, namespace, name string) string {
	lease, err := e.Kube.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

// LeaseHeldBy is a check that the Lease namespace/name is held by holder.
func (e *Env) LeaseHeldBy(namespace, name, holder string) poll.Check {
	return func(ctx context.Context) error {
		h := e.LeaseHolder(ctx, namespace, name)
		return poll.Done(h == holder, "held by %q", h)
	}
}

// WaitForLeaseHolder waits until one of replicas holds the Lease and
// returns it.
func (e *Env) WaitForLeaseHolder(t testing.TB, namespace, name string, replicas ...*Replica) *Replica {
	t.Helper()
	var holder *Replica
	Eventually(t, "a replica to hold the Lease "+namespace+"/"+name, func(ctx context.Context) error {
		h := e.LeaseHolder(ctx, namespace, name)
		for _, r := range replicas {
			if r.Identity == h {
				holder = r
				return nil
			}
		}
		return fmt.Errorf("held by %q", h)
	})
	return holder
}

// TakeLease gives the Lease to holder for an hour, as `kubectl patch lease
// NAME --type merge -p '{"spec":{"holderIdentity":...}}'` would: the way a
// partitioned leader finds its Lease when it comes back. It returns when.
func (e *Env) TakeLease(t testing.TB, namespace, name, holder string) time.Time {
	t.Helper()
	now := time.Now()
	patch := fmt.Sprintf(`{"spec":{"holderIdentity":%q,"renewTime":%q,"leaseDurationSeconds":3600}}`,
		holder, now.UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
	if _, err := e.Kube.CoordinationV1().Leases(namespace).Patch(context.Background(), name, types.MergePatchType,
		[]byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("taking the Lease: %v", err)
	}
	return now
}

// CheckLeadership reads the audit log and fails the test on any write of a
// replica outside its leadership (before it acquired the Lease, after its
// last renewal plus the renew deadline, or after it released it), and on
// any two leaderships that overlap unless forced says the Lease was taken
// by force. It logs the periods and returns the report.
func (e *Env) CheckLeadership(t testing.TB, namespace, leaseID string, renewDeadline time.Duration, forced bool) *LeadershipReport {
	t.Helper()
	r, err := Leaderships(e.AuditLog(t), namespace, leaseID, namespace, renewDeadline)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Periods {
		t.Logf("leadership: %s", p)
	}
	for _, w := range r.Outside {
		t.Errorf("a write outside its writer's leadership: %s", w)
	}
	if !forced {
		for _, o := range r.Overlaps {
			t.Errorf("two leaders at once: %s", o)
		}
		for _, w := range r.Stale {
			t.Errorf("a write after the Lease named another holder: %s", w)
		}
	}
	if t.Failed() {
		t.Logf("the Lease's writes, as received:")
		for _, w := range r.Leases {
			t.Logf("  %s", w)
		}
	}
	return r
}

// FirstLeadershipAfter is the first period of a holder other than not that
// began after t: a takeover.
func (r *LeadershipReport) FirstLeadershipAfter(t time.Time, not string) (Leadership, bool) {
	for _, p := range r.Periods {
		if p.Holder != not && p.From.After(t) {
			return p, true
		}
	}
	return Leadership{}, false
}

// LastLeadershipOf is the holder's last period that began before t.
func (r *LeadershipReport) LastLeadershipOf(holder string, before time.Time) (Leadership, bool) {
	var last Leadership
	found := false
	for _, p := range r.Periods {
		if p.Holder == holder && p.From.Before(before) {
			last, found = p, true
		}
	}
	return last, found
}
