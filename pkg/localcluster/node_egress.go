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
	"fmt"
	"os"
)

// The API server lives on the host's loopback and the pods inside the
// node's network namespace, where no route from the host leads. A webhook
// behind a Service (a CRD's conversion webhook in its pods) is therefore
// reached the way clusters whose control plane is off the pod network do
// it, with konnectivity: kube-apiserver's egress selector sends the
// "cluster" network's traffic (webhooks behind Services, the kubelet) as
// HTTP CONNECT requests over a Unix socket, which the forwarder answers by
// dialling from inside the node's namespace; and with aggregator routing
// the API server dials a Service's endpoint, a pod's address, instead of
// its ClusterIP, for which there is no kube-proxy here.

// egressConfigFile is kube-apiserver's --egress-selector-config-file.
const egressConfigFile = "egress-selector.yaml"

// egressSocket is where the forwarder answers the API server's CONNECTs.
func (c *Cluster) egressSocket() string { return c.nodePath("egress.sock") }

// egressAllow is what the forwarder may dial for the API server: the pods,
// and the node's loopback, where the kubelet listens.
var egressAllow = podSubnet + ",127.0.0.1/32"

// egressArgs writes the egress selector's configuration and returns the
// API server's flags that use it.
func (c *Cluster) egressArgs() ([]string, error) {
	config := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, c.egressSocket())
	if err := os.WriteFile(c.path(egressConfigFile), []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("writing the API server's egress selector configuration: %w", err)
	}
	return []string{
		"--egress-selector-config-file=" + c.path(egressConfigFile),
		"--enable-aggregator-routing=true",
	}, nil
}
