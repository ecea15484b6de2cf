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
	"strings"
	"time"
)

// controllers is what the controller manager runs. Only controllers that
// act on API objects alone are useful without nodes:
//   - garbage-collector: deletes dependents whose owner is gone, which the
//     Book controller relies on through ownerReferences;
//   - namespace: actually removes deleted namespaces and their contents,
//     so tests can clean up by deleting a namespace;
//   - serviceaccount, serviceaccount-token, root-ca-certificate-publisher:
//     the default service account, its tokens and kube-root-ca.crt, so that
//     a controller can later run with a service account's credentials;
//   - clusterrole-aggregation: fills the admin/edit/view roles, so that
//     RBAC tests can bind them;
//   - resourcequota: computes each ResourceQuota's usage, without which
//     the quota admission plugin refuses every create the quota covers
//     ("status unknown for quota") and a full quota cannot be shown.
//
// fork:begin v2
//   - storage-version-migrator-controller: runs the
//     storagemigration.k8s.io StorageVersionMigrations that book-controller's
//     --storage-migration creates. It is in the controller
//     manager's default set, which --controllers here replaces. In 1.37 it
//     is GA (gate StorageVersionMigrator on, storagemigration.k8s.io/v1
//     served by default); it refuses to start without the garbage
//     collector, whose resource monitors (GraphBuilder.GetMonitor) are the
//     cache of objects it rewrites. It also sets the CRD's
//     StorageMigrating condition and, when a migration ends (failed too,
//     in 1.37.2), its storedVersions to the storage version alone. In
//     1.36 its gate is off by default and it does not start.
//
// fork:end v2
var controllers = []string{
	"garbage-collector-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller",
	"resourcequota-controller",
	"storage-version-migrator-controller", // fork:line v2
}

// fork:begin node
// nodeControllers are what a Deployment needs once there is a node: the
// deployment and replicaset controllers make its pods, the node lifecycle
// controller lifts the not-ready taint the node is created with, pod GC
// deletes the pods of a node that is gone, and the EndpointSlice controller
// gives the API server the pod behind a webhook's Service (node_egress.go).
var nodeControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"node-lifecycle-controller",
	"pod-garbage-collector-controller",
	"endpointslice-controller",
}

// fork:end node

func (c *Cluster) controllers() []string {
	// fork:begin node
	if c.st.Node != nil {
		return append(append([]string{}, controllers...), nodeControllers...)
	}
	// fork:end node
	return controllers
}

func (c *Cluster) controllerManagerArgs() []string {
	return []string{
		// No --authentication-kubeconfig: it would make the controller
		// manager look for the client CA that the apiserver publishes only
		// when it has one (this one uses tokens), and log an error about it
		// every few seconds forever. Only /healthz, which needs no
		// authentication, is ever called on the controller manager.
		"--kubeconfig=" + c.path(controllerManagerKubeconfig),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.st.ControllerManagerPort),
		// The default, /var/run/kubernetes, would be shared by every
		// cluster on the machine.
		"--cert-dir=" + filepath.Join(c.dir, "controller-manager-certs"),
		// One instance only; with leader election a restarted controller
		// manager would wait for its own old lease to expire.
		"--leader-elect=false",
		"--controllers=" + strings.Join(c.controllers(), ","),
		"--service-account-private-key-file=" + c.path(serviceAccountKeyFile),
		"--root-ca-file=" + c.apiServerCAFile(),
	}
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	return c.startComponent(ctx, KubeControllerManager, c.controllerManagerArgs(), 60*time.Second, func(ctx context.Context) error {
		_, err := get(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", c.st.ControllerManagerPort), "")
		return err
	})
}
