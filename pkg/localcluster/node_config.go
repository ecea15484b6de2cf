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
	"path/filepath"
)

// The node's configuration files, all under Dir/node. Every path the
// daemons would otherwise take from their defaults (/var/lib/kubelet,
// /run/containerd, /etc/cni/net.d, /var/log/pods, ...) is set here, so that
// Stop's removal of Dir removes the node's state.

func (c *Cluster) nodePath(elem ...string) string {
	return c.path(append([]string{nodeDir}, elem...)...)
}

func (c *Cluster) containerdSocket() string { return c.nodePath("containerd.sock") }

// containerdConfig: the CRI plugin with runc (Debian's, at /usr/sbin/runc
// or wherever PATH finds it), overlayfs, the node's CNI directories, the
// pause image from the loopback registry, network namespaces mounted under
// the state directory (so that Stop finds them), and
// restrict_oom_score_adj: without CAP_SYS_RESOURCE, which containers and
// sandboxed VMs often lack, runc cannot lower a process's oom_score_adj
// and every sandbox fails with "can't get final child's PID from pipe:
// EOF". NRI and the /opt plugin are off: they would use host paths.
func (c *Cluster) containerdConfig(runc string) string {
	n := c.nodePath
	return fmt.Sprintf(`version = 3
root = %q
state = %q
imports = []
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt"]

[grpc]
  address = %q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %q

[plugins."io.containerd.transfer.v1.local"]
  config_path = %q

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = [%q]
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = %q
      SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.image-verifier.v1.bindir"]
  bin_dir = %q
`, n("containerd", "root"), n("containerd", "state"), c.containerdSocket(), PauseImage,
		n("containerd", "certs.d"), n("containerd", "certs.d"), n("cdi"),
		filepath.Join(c.st.BinDir, "cni"), n("cni", "net.d"), runc, n("containerd", "verifiers"))
}

// registryHosts tells containerd to pull from the loopback registry over
// plain HTTP.
func registryHosts() string {
	return fmt.Sprintf(`server = "http://%s"

[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, RegistryHost, RegistryHost)
}

// cniConfig: the bridge plugin with host-local addresses, then loopback.
// isGateway is false and the only route is to the Service range, via the
// bridge: createNetns put the gateway's and the kubernetes Service's
// addresses there. No IP masquerade, no forwarding: a pod can reach the
// node's bridge addresses and other pods, nothing else.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "localcluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": %q, "gw": %q}]
      }
    },
    {"type": "loopback"}
  ]
}
`, nodeBridge, c.nodePath("cni", "ipam"), podSubnet, podGateway, serviceClusterIPRange, podGateway)
}

// kubeletConfig: serving on 127.0.0.1 with the node's certificate, clients
// authenticated by the node CA or a token the API server vouches for, and
// authorized by the API server (SubjectAccessReview); the node's cgroup,
// directories and resolv.conf; cgroup v1 allowed (it is what many CI
// machines have); and eviction thresholds low enough that the other users
// of a shared machine cannot get the node's pods evicted.
func (c *Cluster) kubeletConfig() string {
	n := c.nodePath
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %q
tlsPrivateKeyFile: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
containerRuntimeEndpoint: %q
cgroupDriver: cgroupfs
cgroupRoot: %q
failCgroupV1: false
failSwapOn: false
podLogsDir: %q
volumePluginDir: %q
resolvConf: %q
clusterDomain: cluster.local
clusterDNS: ["127.0.0.1"]
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
shutdownGracePeriod: 0s
`, c.st.Node.KubeletPort, c.st.Node.KubeletHealthzPort, c.nodePKI(kubeletServingCert), c.nodePKI(kubeletServingKey),
		c.nodePKI(nodeCACert), "unix://"+c.containerdSocket(), nodeCgroup, n("pod-logs"), n("volume-plugins"), n("resolv.conf"))
}

// resolvConf sends a pod's DNS queries to its own loopback, where nothing
// answers: no query leaves the machine, and the controller needs none (it
// reaches the API server by the address in KUBERNETES_SERVICE_HOST).
const resolvConf = "nameserver 127.0.0.1\noptions ndots:1 attempts:1 timeout:1\n"

// writeNodeConfig writes every file the node's daemons read.
func (c *Cluster) writeNodeConfig(runc string) error {
	files := map[string]string{
		c.nodePath("containerd", "config.toml"):                         c.containerdConfig(runc),
		c.nodePath("containerd", "certs.d", RegistryHost, "hosts.toml"): registryHosts(),
		c.nodePath("cni", "net.d", "10-localcluster.conflist"):          c.cniConfig(),
		c.nodePath("kubelet.yaml"):                                      c.kubeletConfig(),
		c.nodePath("resolv.conf"):                                       resolvConf,
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("localcluster: writing %s: %w", path, err)
		}
	}
	for _, d := range []string{"kubelet", "pod-logs", "volume-plugins", "cdi", "cni/ipam"} {
		if err := os.MkdirAll(c.nodePath(d), 0o755); err != nil {
			return err
		}
	}
	return writeKubeconfig(c.nodePath("kubelet.kubeconfig"), c.apiServerURL(), c.ca, "system:node:"+nodeName, c.tokens.Node)
}
