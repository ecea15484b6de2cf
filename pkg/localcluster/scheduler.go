package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

const schedulerKubeconfig = "kube-scheduler.kubeconfig"

func (c *Cluster) schedulerArgs() []string {
	return []string{
		"--kubeconfig=" + c.path(schedulerKubeconfig),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.st.Node.SchedulerPort),
		"--cert-dir=" + filepath.Join(c.dir, "scheduler-certs"),
		// One instance; see the controller manager's flag.
		"--leader-elect=false",
	}
}

func (c *Cluster) startScheduler(ctx context.Context) error {
	if err := writeKubeconfig(c.path(schedulerKubeconfig), c.apiServerURL(), c.ca, "system:kube-scheduler", c.tokens.Scheduler); err != nil {
		return err
	}
	return c.startComponent(ctx, KubeScheduler, c.schedulerArgs(), 60*time.Second, func(ctx context.Context) error {
		_, err := get(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", c.st.Node.SchedulerPort), "")
		return err
	})
}
