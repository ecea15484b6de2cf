package binary_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

const (
	leaseID       = "book-controller"
	leaseDuration = 4 * time.Second
)

// replica is one controller process with leader election on.
type replica struct {
	cmd         *exec.Cmd
	out         *bytes.Buffer
	metricsAddr string
	exited      chan struct{} // closed when the process has been reaped
}

func startReplica(t *testing.T, ns string) *replica {
	t.Helper()
	r := &replica{out: &bytes.Buffer{}, metricsAddr: framework.FreeAddr(t), exited: make(chan struct{})}
	r.cmd = exec.Command(binary, "--kubeconfig", env.Cluster.KubeconfigPath(), "--namespace", ns,
		"--leader-elect", "--leader-elect-namespace", ns, "--leader-elect-id", leaseID,
		"--leader-elect-lease-duration", leaseDuration.String(), "--leader-elect-renew-deadline", "3s",
		"--leader-elect-retry-period", "500ms",
		"--metrics-bind-address", r.metricsAddr, "--health-probe-bind-address", "0")
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.exited)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			t.Logf("replica output:\n%s", r.out.String())
		}
	})
	return r
}

// metric reads one value from the replica's /metrics; -1 if unreachable.
func (r *replica) metric(t *testing.T, name string, labels ...string) float64 {
	code, _, err := framework.HTTPGet(r.metricsAddr, "/metrics")
	if err != nil || code != 200 {
		return -1
	}
	v, err := framework.MetricValue(framework.Scrape(t, r.metricsAddr), name, labels...)
	if err != nil {
		return -1
	}
	return v
}

// TestLeaderKilledStandbyTakesOver runs two controller processes with
// leader election, SIGKILLs the leader (no chance to release the Lease) and
// expects the standby to take over within the lease duration plus 5s.
func TestLeaderKilledStandbyTakesOver(t *testing.T) {
	ctx := context.Background()
	if err := framework.InstallCRD(ctx, env.Extensions); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	replicas := []*replica{startReplica(t, ns), startReplica(t, ns)}

	var leader, standby *replica
	framework.Eventually(t, "one replica to lead", func(context.Context) (bool, error) {
		for i, r := range replicas {
			if r.metric(t, "leader_election_master_status") == 1 {
				leader, standby = r, replicas[1-i]
				return true, nil
			}
		}
		return false, nil
	})

	for i := range 3 {
		name := fmt.Sprintf("before-%d", i)
		if _, err := env.Books.WebappV1().Books(ns).Create(ctx, framework.NewBook(ns, name, "t", 1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitForReady(t, ns, name, metav1.ConditionTrue, "ConfigMapReady")
	}
	if v := standby.metric(t, "book_controller_reconcile_total"); v != 0 {
		t.Fatalf("the standby reconciled %v times while the leader was alive", v)
	}
	if v := standby.metric(t, "leader_election_master_status"); v != 0 {
		t.Fatalf("both replicas report leading")
	}
	holderBefore := holder(ctx, t, ns)

	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-leader.exited
	killedAt := time.Now()
	framework.Eventually(t, "the standby to take the Lease", func(ctx context.Context) (bool, error) {
		h := holder(ctx, t, ns)
		return h != "" && h != holderBefore, nil
	})
	if took := time.Since(killedAt); took > leaseDuration+5*time.Second {
		t.Errorf("takeover took %v, want within %v", took, leaseDuration+5*time.Second)
	}

	if _, err := env.Books.WebappV1().Books(ns).Create(ctx, framework.NewBook(ns, "after", "t", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForReady(t, ns, "after", metav1.ConditionTrue, "ConfigMapReady")
	if v := standby.metric(t, "leader_election_master_status"); v != 1 {
		t.Errorf("the new leader reports leader_election_master_status %v", v)
	}
}

func holder(ctx context.Context, t *testing.T, ns string) string {
	lease, err := env.Kube.CoordinationV1().Leases(ns).Get(ctx, leaseID, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
