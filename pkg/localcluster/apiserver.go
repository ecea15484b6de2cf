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

// serviceClusterIPRange only has to exist: there are no nodes, so no service
// is ever reached through it.
const serviceClusterIPRange = "10.0.0.0/24"

// ShardedListAndWatchGate is kube-apiserver's feature gate for shard
// selectors on lists and watches (KEP-5866): alpha in v1.36 and v1.37.
const ShardedListAndWatchGate = "ShardedListAndWatch"

func (c *Cluster) apiServerURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", c.st.APIServerPort)
}

// apiServerCertDir is where kube-apiserver writes its self-signed serving
// certificate (for 127.0.0.1) on first start and reuses it after.
func (c *Cluster) apiServerCertDir() string { return filepath.Join(c.dir, "apiserver-certs") }

// apiServerCAFile holds the serving certificate followed by the CA that
// signed it, so it serves as the CA bundle for clients.
func (c *Cluster) apiServerCAFile() string {
	return filepath.Join(c.apiServerCertDir(), "apiserver.crt")
}

func (c *Cluster) apiServerArgs() ([]string, error) {
	audit, err := c.auditArgs()
	if err != nil {
		return nil, err
	}
	if c.st.ShardedListAndWatch {
		audit = append(audit, "--feature-gates="+ShardedListAndWatchGate+"=true")
	}
	authz := "--authorization-mode=RBAC"
	// fork:begin node
	if c.st.Node != nil {
		authz = "--authorization-mode=Node,RBAC"
		audit = append(audit, c.kubeletClientArgs()...)
		egress, err := c.egressArgs()
		if err != nil {
			return nil, err
		}
		audit = append(audit, egress...)
	}
	// fork:end node
	return append([]string{
		"--etcd-servers=" + c.etcdURL(),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.st.APIServerPort),
		"--cert-dir=" + c.apiServerCertDir(),
		"--token-auth-file=" + c.path(tokenAuthFile),
		authz,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.path(serviceAccountKeyFile),
		"--service-account-signing-key-file=" + c.path(serviceAccountKeyFile),
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		// The default reconciler would publish 127.0.0.1 as the endpoint of
		// the kubernetes service, which EndpointSlice validation rejects,
		// filling the log with errors. Nothing here needs that service.
		"--endpoint-reconciler-type=none",
	}, append(audit, c.st.APIServerArgs...)...), nil
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	args, err := c.apiServerArgs()
	if err != nil {
		return err
	}
	return c.startComponent(ctx, KubeAPIServer, args, 60*time.Second, func(ctx context.Context) error {
		// /readyz also waits for the post-start hooks, such as the
		// bootstrap RBAC roles, that clients rely on.
		_, err := get(ctx, c.apiServerURL()+"/readyz", c.tokens.Admin)
		return err
	})
}

// fork:begin node
// kubeletClientArgs let the API server reach the kubelet (logs, exec,
// port-forward) at the node's InternalIP, 127.0.0.1, verifying its
// certificate and presenting its own (node_pki.go).
func (c *Cluster) kubeletClientArgs() []string {
	return []string{
		"--kubelet-client-certificate=" + c.nodePKI(apiServerClientCert),
		"--kubelet-client-key=" + c.nodePKI(apiServerClientKey),
		"--kubelet-certificate-authority=" + c.nodePKI(nodeCACert),
		"--kubelet-preferred-address-types=InternalIP,Hostname",
	}
}

// fork:end node
