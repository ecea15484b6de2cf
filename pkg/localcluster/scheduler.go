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
