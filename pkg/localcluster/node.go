package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	// APIProxy forwards the kubernetes Service's address to the API server.
	APIProxy = "apiproxy"
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
// machine, like the registry's port and the bridge.
const nodeCgroup = "/localcluster-node"

// Pod networking: the bridge the CNI bridge plugin attaches pods to, its
// address (the pods' gateway) and the pod subnet. The kubernetes Service's
// address goes on the bridge too, where the API proxy listens.
const (
	nodeBridge    = "lcnode0"
	podGateway    = "10.244.0.1"
	podSubnet     = "10.244.0.0/24"
	apiServiceIP  = "10.0.0.1"
	apiProxyPort  = 443
	podSubnetBits = 24
)

// nodeStartOrder follows the control plane's startOrder.
var nodeStartOrder = []string{KubeScheduler, Registry, APIProxy, Containerd, Kubelet}

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
}

// names are the processes this cluster runs, in start order.
func (c *Cluster) names() []string {
	if c.st.Node == nil {
		return startOrder
	}
	return append(append([]string{}, startOrder...), nodeStartOrder...)
}

// Components names the processes this cluster runs (the keys Pids has
// when everything runs).
func (c *Cluster) Components() []string { return append([]string(nil), c.names()...) }

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
	for _, start := range []func(context.Context) error{c.startScheduler, c.startRegistry, c.startAPIProxy, c.startContainerd, c.startKubelet, c.waitNodeReady} {
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
	if err := deleteBridge(); err != nil {
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
	return createBridge()
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

func (c *Cluster) startAPIProxy(ctx context.Context) error {
	listen := net.JoinHostPort(apiServiceIP, fmt.Sprint(apiProxyPort))
	bin, args := c.helper("apiproxy", "-listen", listen, "-to", fmt.Sprintf("127.0.0.1:%d", c.st.APIServerPort))
	return c.launch(ctx, component{name: APIProxy, bin: bin, args: args, timeout: 30 * time.Second, check: func(ctx context.Context) error {
		// A connection to the node's own bridge address: it never leaves
		// the host.
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", listen)
		if err == nil {
			conn.Close()
		}
		return err
	}})
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	return c.launch(ctx, component{
		name: Containerd, args: []string{"--config", c.nodePath("containerd", "config.toml")}, timeout: 60 * time.Second,
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
		name: Kubelet, args: args, timeout: 60 * time.Second,
		started: func(pid int) error { return joinCgroup("daemons", pid) },
		check: func(ctx context.Context) error {
			_, err := get(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", c.st.Node.KubeletHealthzPort), "")
			return err
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
// host back its bridge-less network, cgroups, sysctls and paths.
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
	errs = append(errs, deleteBridge())
	errs = append(errs, removeCgroups())
	errs = append(errs, c.st.Node.restoreHost(c.dir))
	return errors.Join(errs...)
}
