package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/test/integration/framework"
)

// leaseNamespace is where the deployment's Role lets the controller's
// ServiceAccount hold Leases.
const leaseNamespace = "book-controller-system"

// Short lease timings keep the test quick; the production defaults are
// 15s/10s/2s. Each test gets its own Lease, named after its namespace.
func testLeaderElection(ns, identity string) manager.LeaderElection {
	return manager.LeaderElection{
		Enabled: true, Namespace: leaseNamespace, ID: ns, Identity: identity,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
	}
}

// TestLeaderElectionOnlyLeaderWorksAndStandbyTakesOver runs two replicas.
// Only the holder of the Lease may write Books' objects; when it is stopped,
// the standby must take over, and the two must never have written in
// overlapping periods.
func TestLeaderElectionOnlyLeaderWorksAndStandbyTakesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)

	var countA, countB framework.RequestCounter
	probeA, probeB := framework.FreeAddr(t), framework.FreeAddr(t)
	a := env.StartController(t, framework.ControllerOptions{
		Namespace: ns, RESTConfig: countA.Wrap(env.ControllerServiceAccountConfig(t)),
		LeaderElection: testLeaderElection(ns, "replica-a"), ProbeAddr: probeA,
	})
	// Let A take the Lease first, so the roles are known.
	framework.Eventually(t, "replica-a to hold the Lease", func(ctx context.Context) (bool, error) {
		return leaseHolder(ctx, ns) == "replica-a", nil
	})
	env.StartController(t, framework.ControllerOptions{
		Namespace: ns, RESTConfig: countB.Wrap(env.ControllerServiceAccountConfig(t)),
		LeaderElection: testLeaderElection(ns, "replica-b"), ProbeAddr: probeB,
	})

	for i := range 5 {
		name := fmt.Sprintf("le-%d", i)
		if _, err := env.Books.WebappV1().Books(ns).Create(ctx, framework.NewBook(ns, name, "t", int32(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForReady(t, ns, name, metav1.ConditionTrue, "ConfigMapReady")
	}
	// The standby is warm and ready, but has written nothing.
	framework.Eventually(t, "the standby to be ready", func(context.Context) (bool, error) {
		code, _, err := framework.HTTPGet(probeB, "/readyz")
		return err == nil && code == http.StatusOK, nil
	})
	if w := countB.ObjectWrites(); len(w) != 0 {
		t.Fatalf("the standby wrote %d times while the leader worked: %v", len(w), w)
	}
	if len(countA.ObjectWrites()) == 0 {
		t.Fatalf("the leader wrote nothing")
	}

	// Graceful stop: the leader drains, releases the Lease, and the standby
	// takes over without waiting for the lease to expire.
	stoppedAt := time.Now()
	if err := a.Stop(); err != nil {
		t.Fatalf("leader stopped with %v", err)
	}
	framework.Eventually(t, "replica-b to take the Lease", func(ctx context.Context) (bool, error) {
		return leaseHolder(ctx, ns) == "replica-b", nil
	})
	if took := time.Since(stoppedAt); took > 4*time.Second+5*time.Second {
		t.Errorf("takeover took %v, want within the lease duration plus 5s", took)
	}
	if _, err := env.Books.WebappV1().Books(ns).Create(ctx, framework.NewBook(ns, "after", "t", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "after", metav1.ConditionTrue, "ConfigMapReady")

	lastA := latest(countA.ObjectWrites())
	firstB := earliest(countB.ObjectWrites())
	if firstB.IsZero() {
		t.Fatalf("the new leader wrote nothing")
	}
	if !lastA.Before(firstB) {
		t.Errorf("writes overlapped: old leader's last write at %v, new leader's first at %v", lastA, firstB)
	}
}

func leaseHolder(ctx context.Context, ns string) string {
	lease, err := env.Kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, ns, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

func latest(rs []framework.Request) time.Time {
	var t time.Time
	for _, r := range rs {
		if r.At.After(t) {
			t = r.At
		}
	}
	return t
}

func earliest(rs []framework.Request) time.Time {
	var t time.Time
	for _, r := range rs {
		if t.IsZero() || r.At.Before(t) {
			t = r.At
		}
	}
	return t
}

// TestLeaseThatCannotBeHeldFailsAtStart: a Lease namespace that does not
// exist, or one where the controller's Role is not bound, would leave the
// replica retrying for ever. It must stop at once with an error that names
// the namespace and the fix, having written nothing.
func TestLeaseThatCannotBeHeldFailsAtStart(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		cfg       *rest.Config
		namespace string
		want      string
	}{
		{"namespace missing", env.RESTConfig(), "no-such-namespace",
			`--leader-elect-namespace "no-such-namespace" does not exist`},
		{"no Role bound there", env.ControllerServiceAccountConfig(t), env.Namespace(t),
			`not allowed to hold the Lease`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			le := testLeaderElection("lease-check", "replica")
			le.Namespace = tc.namespace
			ctx, cancel := context.WithTimeout(context.Background(), framework.Timeout)
			defer cancel()
			err := manager.Run(ctx, manager.Config{RESTConfig: tc.cfg, Workers: 1,
				LeaderElection: le, MetricsAddr: "0", ProbeAddr: "0"})
			if ctx.Err() != nil {
				t.Fatal("manager.Run kept retrying instead of failing")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("manager.Run: got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
			if _, err := env.Kube.CoordinationV1().Leases(tc.namespace).Get(ctx, "lease-check", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a Lease lease-check exists in %s after the check (err %v)", tc.namespace, err)
			}
		})
	}
}
