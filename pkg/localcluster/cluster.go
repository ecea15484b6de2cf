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
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Files under Options.Dir.
const (
	adminKubeconfig             = "kubeconfig"
	controllerManagerKubeconfig = "kube-controller-manager.kubeconfig"
	serviceAccountKeyFile       = "service-account.key"
	tokensFile                  = "tokens.json"
	tokenAuthFile               = "token-auth.csv"
	stateFile                   = "cluster.json"
	logsDir                     = "logs"
)

// startOrder is the order of dependence; Stop goes the other way so that no
// process spends its shutdown retrying one that is already gone.
var startOrder = []string{Etcd, KubeAPIServer, KubeControllerManager}

// stopGrace is how long a process has to exit after SIGTERM before it is
// killed; all three normally take well under a second.
const stopGrace = 10 * time.Second

// Options configures Start. The zero value is a test cluster in a temporary
// directory, with binaries from hack/build-tools.sh.
type Options struct {
	// Dir holds etcd's data, keys, certificates, kubeconfigs, logs and pid
	// files. If empty, a temporary directory is used and removed by Stop.
	// A given Dir is kept, and a later Start on it reuses its data.
	Dir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager. If
	// empty, Start runs hack/build-tools.sh from the enclosing repository,
	// which takes minutes the first time.
	BinDir string
	// Kubernetes is the minor version whose binaries Start builds when
	// BinDir is empty, e.g. "1.36" (EnsureBinariesOf); empty: the one
	// hack/tools/kubernetes pins, which the tests run.
	Kubernetes string
	// Log, if set, also receives the processes' output, each line prefixed
	// with the process name. It is always written to Dir/logs too. Ignored
	// when Detached, since the processes outlive this writer.
	Log io.Writer
	// Detached starts processes that survive this Go process, for
	// hack/local-up.sh. Without it they are killed when this process dies
	// (on Linux), so a failed test leaks nothing.
	Detached bool
	// AuditLog makes kube-apiserver record every write to Books,
	// ConfigMaps, Events and Leases in Dir/audit.log (AuditLogPath), with
	// the writer's user agent. Off by default: it costs every write a line
	// of JSON written before the answer, which benchmarks should not pay.
	AuditLog bool
	// ShardedListAndWatch turns on kube-apiserver's alpha feature gate of
	// that name (Kubernetes v1.36+, off by default), which makes lists and
	// watches honour metav1.ListOptions.ShardSelector: what book-controller
	// --shards needs. The tests and the demo turn it on; a production
	// cluster must be started with --feature-gates=ShardedListAndWatch=true.
	ShardedListAndWatch bool
	// APIServerArgs and EtcdArgs are appended to the flags kube-apiserver
	// and etcd get from here, and win over them (for both, the last of a
	// repeated flag counts): the fault tests start etcd with a small
	// --quota-backend-bytes, or kube-apiserver with --watch-cache=false.
	APIServerArgs []string
	EtcdArgs      []string
	// fork:begin node
	// Node adds a real node, 127.0.0.1, on which pods run: kube-scheduler,
	// containerd with Debian's runc, the kubelet, go-containerregistry's
	// registry on RegistryAddr (the node pulls from it; its pause image
	// too). containerd, the kubelet, the pods' bridge and the pods live in
	// a network namespace of the node's own, NodeNetns; a forwarder joins
	// it to the host's loopback (the API server, the registry, the
	// kubelet's port), so the node sends nothing to any other address on
	// the host. The controller manager also runs the deployment,
	// replicaset, node-lifecycle and pod GC controllers, and the API server
	// authorizes the kubelet with the Node authorizer. Needs root, cgroups
	// and runc (hack/install-runc.sh); one node per machine. Stop kills
	// every process in the node's cgroup, unmounts what it mounted, deletes
	// the namespace and restores the host's sysctls and paths.
	Node bool
	// fork:end node
}

// Cluster is a running local control plane. Its methods are safe for
// concurrent use.
type Cluster struct {
	mu        sync.Mutex
	dir       string
	removeDir bool // a temporary Dir, removed by Stop
	log       io.Writer
	logMu     sync.Mutex // shared by the processes' prefixWriters on log
	st        state
	tokens    tokens
	ca        []byte
	procs     map[string]*process
	stopped   bool
}

// Start starts etcd, kube-apiserver and kube-controller-manager on free
// loopback ports, waits until each is ready, and writes an admin kubeconfig
// (KubeconfigPath). ctx bounds only the start: the cluster runs until Stop.
// On failure, whatever was started is stopped and Dir is kept for its logs.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	dir, removeDir, err := prepareDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, removeDir: removeDir, procs: map[string]*process{}}
	if !opts.Detached {
		c.log = opts.Log
	}
	if err := c.start(ctx, opts); err != nil {
		c.removeDir = false
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func prepareDir(dir string) (abs string, temp bool, err error) {
	if dir == "" {
		dir, err = os.MkdirTemp("", "localcluster-")
		if err != nil {
			return "", false, fmt.Errorf("localcluster: creating a data directory: %w", err)
		}
		return dir, true, nil
	}
	if abs, err = filepath.Abs(dir); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", false, fmt.Errorf("localcluster: creating %s: %w", abs, err)
	}
	// Two clusters on one Dir would share etcd's data and each other's pid
	// files; refuse rather than corrupt both.
	if old, err := Attach(abs); err == nil {
		if pids := old.Pids(); len(pids) > 0 {
			return "", false, fmt.Errorf("localcluster: a cluster already runs in %s (pids %v): stop it first (hack/local-up.sh down)", abs, pids)
		}
	}
	return abs, false, nil
}

// start starts etcd, kube-apiserver and kube-controller-manager, in that
// order, each once the one before answers.
func (c *Cluster) start(ctx context.Context, opts Options) error {
	binDir, err := binariesFor(ctx, opts)
	if err != nil {
		return err
	}
	ports, err := FreePorts(7)
	if err != nil {
		return err
	}
	c.st = state{
		BinDir:                binDir,
		Detached:              opts.Detached,
		EtcdClientPort:        ports[0],
		EtcdPeerPort:          ports[1],
		APIServerPort:         ports[2],
		ControllerManagerPort: ports[3],
		AuditLog:              opts.AuditLog,
		ShardedListAndWatch:   opts.ShardedListAndWatch,
		APIServerArgs:         opts.APIServerArgs,
		EtcdArgs:              opts.EtcdArgs,
		Processes:             map[string]procID{},
	}
	// fork:begin node
	if opts.Node {
		c.st.Node = &nodeState{KubeletPort: ports[4], KubeletHealthzPort: ports[5], SchedulerPort: ports[6]}
		if err := c.writeNodePKI(); err != nil {
			return err
		}
	}
	// fork:end node
	if err := c.startControlPlane(ctx); err != nil {
		return err
	}
	// fork:begin node
	if c.st.Node != nil {
		return c.startNode(ctx)
	}
	// fork:end node
	return nil
}

// startControlPlane writes the credentials, starts etcd, kube-apiserver
// and kube-controller-manager, and writes the kubeconfigs the controller
// manager needs.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	if err := c.writeCredentials(); err != nil {
		return err
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	if err := c.writeKubeconfigs(); err != nil {
		return err
	}
	return c.startControllerManager(ctx)
}

// binariesFor returns the absolute directory of the binaries opts needs:
// Options.BinDir, checked, or the one hack/build-tools.sh builds them into.
func binariesFor(ctx context.Context, opts Options) (string, error) {
	names := controlPlane
	// fork:begin node
	if opts.Node {
		names = append(append([]string{}, controlPlane...), NodeBinaries)
	}
	// fork:end node
	binDir := opts.BinDir
	if binDir == "" {
		root, err := findRepoRoot()
		if err != nil {
			return "", err
		}
		if binDir, err = EnsureBinariesOf(ctx, root, opts.Kubernetes, names...); err != nil {
			return "", err
		}
	} else if err := checkBinaries(binDir, names...); err != nil {
		return "", err
	}
	if abs, err := filepath.Abs(binDir); err == nil {
		binDir = abs
	}
	return binDir, nil
}

// writeCredentials writes the service-account signing key and the static
// tokens the components and tests authenticate with.
func (c *Cluster) writeCredentials() error {
	if err := writeServiceAccountKey(c.path(serviceAccountKeyFile)); err != nil {
		return err
	}
	var err error
	if c.tokens, err = loadOrCreateTokens(c.path(tokensFile)); err != nil {
		return err
	}
	return os.WriteFile(c.path(tokenAuthFile), c.tokens.tokenAuthFile(), 0o600)
}

// startComponent starts one process, the binary of its name, and waits
// until check passes.
func (c *Cluster) startComponent(ctx context.Context, name string, args []string, timeout time.Duration, check func(context.Context) error) error {
	return c.launch(ctx, component{name: name, args: args, timeout: timeout, check: check})
}

// component is a process for launch to start.
type component struct {
	name    string
	bin     string // default: BinDir/name
	args    []string
	timeout time.Duration
	started func(pid int) error // if set, called once the process runs
	check   func(context.Context) error
	ns      namespace // where it is born; nil: the host's network namespace
}

// launch starts one process and waits until its check passes. The pid is
// recorded before waiting, so that even if this process dies while
// waiting, hack/local-up.sh down can still find what it started.
func (c *Cluster) launch(ctx context.Context, comp component) error {
	if c.stopped {
		return fmt.Errorf("localcluster: cluster in %s was stopped: Start a new one", c.dir)
	}
	if p := c.procs[comp.name]; p.alive() {
		return fmt.Errorf("localcluster: %s already runs (pid %d): kill it first", comp.name, p.id.Pid)
	}
	var extra io.Writer
	if c.log != nil {
		extra = newPrefixWriter(&c.logMu, c.log, comp.name)
	}
	if comp.bin == "" {
		comp.bin = filepath.Join(c.st.BinDir, comp.name)
	}
	p, err := startProcess(comp.name, comp.bin, comp.args, c.path(logsDir, comp.name+".log"), c.st.Detached, comp.ns, extra)
	if err != nil {
		return err
	}
	c.procs[comp.name] = p
	c.st.Processes[comp.name] = p.id
	if err := c.saveState(); err != nil {
		return err
	}
	if comp.started != nil {
		if err := comp.started(p.id.Pid); err != nil {
			return err
		}
	}
	return waitReady(ctx, p, comp.timeout, comp.check)
}

// Attach finds a cluster that another process started in dir with
// Options.Detached, so that it can be inspected (Pids) or stopped (Stop).
// The error wraps fs.ErrNotExist if dir holds no cluster.
func Attach(dir string) (*Cluster, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: abs, procs: map[string]*process{}}
	if err := readJSON(c.path(stateFile), &c.st); err != nil {
		return nil, fmt.Errorf("localcluster: no cluster in %s (start one with hack/local-up.sh up): %w", abs, err)
	}
	if err := readJSON(c.path(tokensFile), &c.tokens); err != nil {
		return nil, fmt.Errorf("localcluster: reading %s: %w", c.path(tokensFile), err)
	}
	if c.st.Processes == nil {
		c.st.Processes = map[string]procID{}
	}
	c.ca, _ = os.ReadFile(c.apiServerCAFile()) // absent only if the apiserver never started
	for name, id := range c.st.Processes {
		c.procs[name] = attachProcess(name, c.path(logsDir, name+".log"), id)
	}
	return c, nil
}

// Stop stops the processes this Cluster started (or attached to), gracefully
// then by SIGKILL, and waits until they are gone. It removes a temporary
// Dir. Calling it again after it succeeded does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	var errs []error
	// fork:begin node
	if err := c.stopNode(); err != nil {
		errs = append(errs, err)
	}
	// fork:end node
	names := c.names()
	for i := len(names) - 1; i >= 0; i-- {
		if p := c.procs[names[i]]; p != nil {
			if err := p.stop(stopGrace); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.stopped = true
	if c.removeDir {
		return os.RemoveAll(c.dir)
	}
	c.st.Processes = map[string]procID{}
	if err := c.saveState(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// RESTConfig returns a new admin config for the apiserver, which the caller
// may modify freely. It stays valid across StartAPIServer, and does not wait
// for one in progress: the port, token and CA never change after Start.
func (c *Cluster) RESTConfig() *rest.Config { return c.restConfig() }

// KubeconfigPath is the admin kubeconfig, for kubectl and for code that
// takes a path rather than a rest.Config.
func (c *Cluster) KubeconfigPath() string { return c.path(adminKubeconfig) }

// Dir is the data directory, where logs/ holds each process's output.
func (c *Cluster) Dir() string { return c.dir }

// BinDir holds the binaries the cluster runs, and a kubectl.
func (c *Cluster) BinDir() string { return c.st.BinDir }

// names are the processes this cluster runs, in start order.
func (c *Cluster) names() []string {
	// fork:begin node
	if c.st.Node != nil {
		return append(append([]string{}, startOrder...), nodeStartOrder...)
	}
	// fork:end node
	return startOrder
}

// Components names the processes this cluster runs (the keys Pids has
// when everything runs).
func (c *Cluster) Components() []string { return append([]string(nil), c.names()...) }

// Pids returns the pids of this cluster's processes that are still running,
// keyed by Etcd, KubeAPIServer and KubeControllerManager,
// and with Options.Node also KubeScheduler, Registry, Forwarder, // fork:line node
// Containerd and Kubelet. // fork:line node
// An empty map means nothing runs.
func (c *Cluster) Pids() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := map[string]int{}
	for name, p := range c.procs {
		if p.alive() {
			pids[name] = p.id.Pid
		}
	}
	return pids
}

// KillAPIServer kills kube-apiserver with SIGKILL, as a crash would, and
// waits until it is gone. Clients see connection errors until
// StartAPIServer.
func (c *Cluster) KillAPIServer() error { return c.kill(KubeAPIServer) }

// StartAPIServer starts kube-apiserver again after KillAPIServer, on the
// same port with the same data and credentials, and waits until it is ready,
// so existing rest.Configs and kubeconfigs keep working.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startAPIServer(ctx)
}

// KillEtcd kills etcd with SIGKILL and waits until it is gone. The apiserver
// stays up but fails requests and /readyz until StartEtcd.
func (c *Cluster) KillEtcd() error { return c.kill(Etcd) }

// StartEtcd starts etcd again after KillEtcd, on the same port with the same
// data, and waits until it is healthy.
func (c *Cluster) StartEtcd(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startEtcd(ctx)
}

// KillControllerManager kills kube-controller-manager with SIGKILL and waits
// until it is gone; garbage collection stops until StartControllerManager.
func (c *Cluster) KillControllerManager() error { return c.kill(KubeControllerManager) }

// StartControllerManager starts kube-controller-manager again after
// KillControllerManager and waits until it is healthy.
func (c *Cluster) StartControllerManager(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.startControllerManager(ctx)
}

func (c *Cluster) kill(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[name]
	if p == nil {
		return nil
	}
	return p.kill()
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

func (c *Cluster) saveState() error {
	return writeJSON(c.path(stateFile), c.st, 0o644)
}
