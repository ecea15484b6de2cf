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
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Names of the node's processes (keys of Cluster.Pids) and binaries, with
// Options.Node.
const (
	KubeScheduler = "kube-scheduler"
	Containerd    = "containerd"
	Kubelet       = "kubelet"
	// Registry is go-containerregistry's registry on RegistryAddr.
	Registry = "registry"
	// Forwarder joins the node's network namespace and the host's
	// loopback (node-helper forward).
	Forwarder = "forwarder"
	// NodeBinaries asks EnsureBinaries for everything a node needs.
	NodeBinaries = "node"
	nodeHelper   = "node-helper"
)

// The node is called 127.0.0.1, which is also its only address: the
// kubelet refuses a loopback --node-ip, but takes a hostname override that
// is an IP address as its InternalIP.
const nodeName = "127.0.0.1"

// NodeName is the name of the node that Options.Node adds.
const NodeName = nodeName

// The registry's address is fixed because `make image-push
// IMG=localhost:5000/...` and the lesson type it; one node per machine.
const (
	RegistryAddr = "127.0.0.1:5000"
	RegistryHost = "localhost:5000"
	// PauseImage is the pod sandbox image, served by the registry.
	PauseImage = RegistryHost + "/pause:3.10"
)

const nodeDir = "node"

// nodeStopGrace is how long the kubelet and containerd have after SIGTERM.
const nodeStopGrace = 2 * time.Second

// nodeCgroup is the cgroup, in every hierarchy, that holds containerd, the
// kubelet, the shims and every pod (the kubelet's cgroupRoot). One node per
// machine, like the registry's port and the network namespace.
const nodeCgroup = "/localcluster-node"

// Pod networking, all inside the node's network namespace (NodeNetns): the
// bridge the CNI bridge plugin attaches pods to, its address (the pods'
// gateway) and the pod subnet. The kubernetes Service's address goes on the
// bridge too, where the forwarder listens for the API server.
const (
	nodeBridge    = "lcnode0"
	podGateway    = "10.244.0.1"
	podSubnet     = "10.244.0.0/24"
	apiServiceIP  = "10.0.0.1"
	apiProxyPort  = 443
	podSubnetBits = 24
	// bridgeMAC is the bridge's own, fixed, locally administered address
	// (02:…), its last four bytes those of podGateway.
	bridgeMAC = "02:00:0a:f4:00:01"
)

// NodeNetns is the name of the node's network namespace (ip netns list;
// `ip netns exec lcnode ...` looks inside). One node per machine.
const NodeNetns = "lcnode"

// netnsDir is where ip netns keeps its namespaces' bind mounts.
const netnsDir = "/run/netns"

var nodeNetnsPath = netnsDir + "/" + NodeNetns

// nodeStartOrder follows the control plane's startOrder.
var nodeStartOrder = []string{KubeScheduler, Registry, Forwarder, Containerd, Kubelet}

// nodeFiles are what hack/build-tools.sh node puts in the bin directory.
var nodeFiles = []string{KubeScheduler, Kubelet, Containerd, "containerd-shim-runc-v2", nodeHelper, "pause", "cni/bridge", "cni/host-local", "cni/loopback"}

// nodeState is the node's part of cluster.json: its ports, and what Stop
// must restore on the host.
type nodeState struct {
	KubeletPort        int               `json:"kubeletPort"`
	KubeletHealthzPort int               `json:"kubeletHealthzPort"`
	SchedulerPort      int               `json:"schedulerPort"`
	Sysctls            map[string]string `json:"sysctls,omitempty"`
	CreatedPaths       []string          `json:"createdPaths,omitempty"`
	// UnmountNetnsDir: /run/netns was no mount point before ip netns
	// made it one.
	UnmountNetnsDir bool `json:"unmountNetnsDir,omitempty"`
}

// startNode prepares the host and starts the node's processes, then waits
// until the node is Ready.
func (c *Cluster) startNode(ctx context.Context) error {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return errors.New("localcluster: runc not found on PATH: install it (hack/install-runc.sh runs apt-get install runc)")
	}
	if err := c.prepareHost(); err != nil {
		return err
	}
	if err := c.writeNodeConfig(runc); err != nil {
		return err
	}
	for _, start := range []func(context.Context) error{c.startScheduler, c.startRegistry, c.startForwarder, c.startContainerd, c.startKubelet, c.waitNodeReady} {
		if err := start(ctx); err != nil {
			return err
		}
	}
	return nil
}

// prepareHost refuses to start a second node on the machine, clears what a
// node that died left behind, and records the host's settings before
// anything changes them.
func (c *Cluster) prepareHost() error {
	if pids := NodeCgroupPids(); len(pids) > 0 {
		return fmt.Errorf("localcluster: another local node runs on this machine (pids %v in cgroup %s): stop it first (make cluster-down, or end the test that started it)", pids, nodeCgroup)
	}
	if err := deleteNetns(false); err != nil {
		return err
	}
	if err := removeCgroups(); err != nil {
		return err
	}
	if err := c.st.Node.saveHost(); err != nil {
		return err
	}
	if err := c.saveState(); err != nil {
		return err
	}
	if err := createCgroup("daemons"); err != nil {
		return err
	}
	return createNetns()
}

func (c *Cluster) helper(args ...string) (string, []string) {
	return filepath.Join(c.st.BinDir, nodeHelper), args
}

func (c *Cluster) startRegistry(ctx context.Context) error {
	bin, args := c.helper("registry", "-addr", RegistryAddr, "-pause-binary", filepath.Join(c.st.BinDir, "pause"), "-pause-ref", PauseImage)
	return c.launch(ctx, component{name: Registry, bin: bin, args: args, timeout: 30 * time.Second, check: func(ctx context.Context) error {
		_, err := get(ctx, "http://"+RegistryAddr+"/v2/pause/manifests/3.10", "")
		return err
	}})
}

// startForwarder joins the node's network namespace to the host's
// loopback: inside, the kubernetes Service's address (what pods dial,
// KUBERNETES_SERVICE_HOST) and the API server's loopback port (the
// kubelet's kubeconfig) lead to the API server, and 127.0.0.1:5000 to the
// registry; on the host, the kubelet's port leads to the kubelet, and a
// Unix socket takes the API server's CONNECTs to the pods and the kubelet
// (node_egress.go).
func (c *Cluster) startForwarder(ctx context.Context) error {
	api := fmt.Sprintf("127.0.0.1:%d", c.st.APIServerPort)
	kubelet := fmt.Sprintf("127.0.0.1:%d", c.st.Node.KubeletPort)
	service := net.JoinHostPort(apiServiceIP, fmt.Sprint(apiProxyPort))
	bin, args := c.helper("forward", "-netns", nodeNetnsPath,
		"-in", service+"="+api, "-in", api+"="+api, "-in", RegistryAddr+"="+RegistryAddr,
		"-out", kubelet+"="+kubelet, "-connect", c.egressSocket(), "-connect-allow", egressAllow)
	return c.launch(ctx, component{name: Forwarder, bin: bin, args: args, timeout: 30 * time.Second, check: func(ctx context.Context) error {
		// Both ends of one route each way; the listeners are all made
		// before any accepts, so these two mean all of them are there.
		for _, dial := range []func() (net.Conn, error){
			func() (net.Conn, error) { return DialNode(ctx, "tcp", service) },
			func() (net.Conn, error) { return (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", kubelet) },
		} {
			conn, err := dial()
			if err != nil {
				return err
			}
			conn.Close()
		}
		return nil
	}})
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	return c.launch(ctx, component{
		name: Containerd, args: []string{"--config", c.nodePath("containerd", "config.toml")}, timeout: 60 * time.Second, ns: nodeNamespace{},
		started: func(pid int) error { return joinCgroup("daemons", pid) },
		check: func(ctx context.Context) error {
			conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "unix", c.containerdSocket())
			if err == nil {
				conn.Close()
			}
			return err
		},
	})
}

func (c *Cluster) startKubelet(ctx context.Context) error {
	args := []string{
		"--config=" + c.nodePath("kubelet.yaml"),
		"--kubeconfig=" + c.nodePath("kubelet.kubeconfig"),
		"--root-dir=" + c.nodePath("kubelet"),
		"--hostname-override=" + nodeName,
	}
	return c.launch(ctx, component{
		name: Kubelet, args: args, timeout: 60 * time.Second, ns: nodeNamespace{},
		started: func(pid int) error { return joinCgroup("daemons", pid) },
		check: func(ctx context.Context) error {
			return nodeHealthz(ctx, fmt.Sprintf("127.0.0.1:%d", c.st.Node.KubeletHealthzPort))
		},
	})
}

// waitNodeReady waits for the node's Ready condition, which the kubelet sets
// once the runtime and its network (the CNI configuration) are ready.
func (c *Cluster) waitNodeReady(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(c.restConfig())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	why := "not registered"
	for {
		if node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					why = cond.Reason + ": " + cond.Message
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: node %s not Ready after 60s (%s): see %s", nodeName, why, c.path(logsDir, Kubelet+".log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopNode stops the kubelet and containerd, kills what is left in the
// node's cgroups (shims, pods), unmounts what they mounted, and gives the
// host back its network (no namespace of the node's), cgroups, sysctls and
// paths. The forwarder, stopped after this, holds the last sockets in the
// namespace; it is gone with them.
func (c *Cluster) stopNode() error {
	if c.st.Node == nil {
		return nil
	}
	var errs []error
	// Neither keeps state that a kill loses; the kubelet often takes
	// seconds to act on SIGTERM, and the cgroup kill follows anyway.
	for _, name := range []string{Kubelet, Containerd} {
		if p := c.procs[name]; p != nil {
			errs = append(errs, p.stop(nodeStopGrace))
		}
	}
	errs = append(errs, killCgroups(10*time.Second))
	errs = append(errs, unmountUnder(c.nodePath()))
	errs = append(errs, deleteNetns(c.st.Node.UnmountNetnsDir))
	errs = append(errs, removeCgroups())
	errs = append(errs, c.st.Node.restoreHost(c.dir))
	return errors.Join(errs...)
}

// nodeHealthz GETs http://addr/healthz inside the node's network namespace.
func nodeHealthz(ctx context.Context, addr string) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: DialNode, DisableKeepAlives: true}}
	_, err := getWith(ctx, client, "http://"+addr+"/healthz", "")
	return err
}
