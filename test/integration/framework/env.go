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

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/localcluster"
)

// Env is a running control plane and clients for it, as the cluster admin.
type Env struct {
	Cluster    *localcluster.Cluster
	Kube       kubernetes.Interface
	Books      versioned.Interface
	Extensions apiextensionsclient.Interface

	// fork:begin v2
	// stopConversion stops the conversion webhook serveConversion started.
	stopConversion func()
	// fork:end v2
}

// RepoRoot is the repository's top directory, so tests work from any package
// directory. It is found from this source file's path or, when that path is
// not a file path (test binaries built with -trimpath, as make test builds
// them), by walking up from the working directory to book-controller's
// go.mod; a test's working directory is its package directory.
func RepoRoot() string {
	repoRootOnce.Do(func() {
		if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
			repoRoot = filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
			return
		}
		dir, err := os.Getwd()
		if err != nil {
			panic("framework: no working directory: " + err.Error())
		}
		for {
			if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePathRE.Match(data) {
				repoRoot = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				panic("framework: no book-controller go.mod above the working directory; run the tests inside the repository")
			}
			dir = parent
		}
	})
	return repoRoot
}

var (
	repoRootOnce sync.Once
	repoRoot     string
	modulePathRE = regexp.MustCompile(`(?m)^module\s+` + regexp.QuoteMeta("ydzs.io/book-controller") + `\s*$`)
)

// Setup starts a control plane for a test package. Call it from TestMain and
// defer Teardown; with installCRD the Book CRD is installed and Established
// before it returns.
func Setup(installCRD bool) (*Env, error) {
	return SetupWith(SetupOptions{InstallCRD: installCRD})
}

// SetupOptions says what SetupWith starts besides the control plane.
type SetupOptions struct {
	// InstallCRD installs the Book CRD and waits until it is Established.
	InstallCRD bool
	// CRDFile is the CRD in manifests/ that InstallCRD installs: CRDFile
	// (crd.yaml) when empty.
	CRDFile string
	// fork:begin v2
	// OwnConversion leaves the conversion webhook to the tests: a package
	// whose controllers serve it (--webhook-loopback) or that starts from a
	// v1-only CRD. Otherwise, with InstallCRD, the environment serves it
	// (serveConversion) before Setup returns.
	OwnConversion bool
	// fork:end v2
	// APIServerArgs and EtcdArgs are extra flags for kube-apiserver and etcd
	// (localcluster.Options.APIServerArgs, EtcdArgs), for a test that needs a
	// control plane of its own: a small etcd quota, no watch cache.
	APIServerArgs, EtcdArgs []string
	// fork:begin node
	// Node adds a node that runs pods, with a registry on
	// localcluster.RegistryAddr (localcluster.Options.Node): for the e2e
	// tests. It needs root and runc, and only one runs per machine.
	Node bool
	// fork:end node
	// Kubernetes runs the control plane of another supported minor
	// version, e.g. "1.36" (localcluster.EnsureBinariesOf), built by
	// hack/build-tools.sh --k8s; BOOK_TOOLS_BIN, which names the default
	// version's binaries, is then ignored. Empty: the default version.
	Kubernetes string
}

// SetupWith is Setup with a choice of what runs.
func SetupWith(o SetupOptions) (*Env, error) {
	installCRD := o.InstallCRD
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var binDir string
	if o.Kubernetes == "" {
		binDir = os.Getenv("BOOK_TOOLS_BIN")
	}
	if binDir == "" {
		names := []string{localcluster.Etcd, localcluster.KubeAPIServer, localcluster.KubeControllerManager}
		// fork:begin node
		if o.Node {
			names = append(names, localcluster.NodeBinaries)
		}
		// fork:end node
		var err error
		if binDir, err = localcluster.EnsureBinariesOf(ctx, RepoRoot(), o.Kubernetes, names...); err != nil {
			return nil, err
		}
	}
	var log *os.File
	if os.Getenv("BOOK_TEST_CLUSTER_LOG") != "" {
		log = os.Stderr
	}
	// The audit log is how tests prove who wrote what, and when; sharded
	// lists and watches are what --shards needs.
	opts := localcluster.Options{BinDir: binDir, AuditLog: true, ShardedListAndWatch: true,
		APIServerArgs: o.APIServerArgs, EtcdArgs: o.EtcdArgs}
	// fork:begin node
	opts.Node = o.Node
	// fork:end node
	if log != nil {
		opts.Log = log
	}
	cluster, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	env, err := newEnv(cluster)
	if err == nil && installCRD {
		err = env.installCRD(ctx, o)
	}
	if err != nil {
		_ = cluster.Stop()
		return nil, err
	}
	return env, nil
}

func newEnv(cluster *localcluster.Cluster) (*Env, error) {
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0 // tests create objects in bursts
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	books, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ext, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Cluster: cluster, Kube: kube, Books: books, Extensions: ext}, nil
}

// installCRD installs the CRD, serves its conversion unless the tests do
// or it is served already, and then restarts the garbage collector
// (InstallCRDBeforeGC).
func (e *Env) installCRD(ctx context.Context, o SetupOptions) error {
	file := o.CRDFile
	if file == "" {
		file = CRDFile
	}
	if err := InstallCRDFile(ctx, e.Extensions, file); err != nil {
		return err
	}
	// fork:begin v2
	if !o.OwnConversion && e.stopConversion == nil {
		if err := e.serveConversion(ctx); err != nil {
			return err
		}
	}
	// fork:end v2
	return e.RestartControllerManager(ctx)
}

// Teardown stops every process Setup started.
func (e *Env) Teardown() {
	// fork:begin v2
	if e.stopConversion != nil {
		e.stopConversion()
	}
	// fork:end v2
	if err := e.Cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the local cluster:", err)
	}
}

// RESTConfig is a fresh admin configuration without client-side throttling.
func (e *Env) RESTConfig() *rest.Config {
	cfg := e.Cluster.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// Main is a TestMain body: it sets up the environment, runs the tests and
// tears down, also when tests fail or the setup does.
func Main(m *testing.M, installCRD bool, env **Env) {
	e, err := Setup(installCRD)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration setup:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	e.Teardown()
	os.Exit(code)
}

// MainWithController is Main for packages that run the built controller as
// a process: it first builds it as `make build` does (BuildController) and
// puts its path in *binary.
func MainWithController(m *testing.M, installCRD bool, env **Env, binary *string) {
	bin, err := BuildController()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*binary = bin
	Main(m, installCRD, env)
}

// InstallCRDBeforeGC installs the CRD and restarts kube-controller-manager.
// The garbage collector looks for new resource types only every 30 seconds;
// started after the CRD, it watches Books from the first moment, so tests of
// garbage collection don't wait out that period.
func (e *Env) InstallCRDBeforeGC(ctx context.Context) error {
	return e.installCRD(ctx, SetupOptions{})
}

// RestartControllerManager stops kube-controller-manager and starts it
// again: its garbage collector then watches every resource the API server
// serves now, without waiting for its next discovery.
func (e *Env) RestartControllerManager(ctx context.Context) error {
	if err := e.Cluster.KillControllerManager(); err != nil {
		return fmt.Errorf("restarting kube-controller-manager: %w", err)
	}
	if err := e.Cluster.StartControllerManager(ctx); err != nil {
		return fmt.Errorf("restarting kube-controller-manager: %w", err)
	}
	return nil
}

// EditedKubeconfig writes to dir/name a copy of the admin kubeconfig changed
// by edit: a wrong token, an unreachable server, a missing CA.
func (e *Env) EditedKubeconfig(t testing.TB, dir, name string, edit func(*clientcmdapi.Config)) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(e.Cluster.KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Kubectl returns the path of a kubectl within one minor version of the
// cluster: the one next to the control plane binaries, else one that
// hack/build-tools.sh builds (or links from PATH) the first time a test asks,
// since only some tests need one.
func (e *Env) Kubectl(t testing.TB) string {
	t.Helper()
	if kubectl := filepath.Join(e.Cluster.BinDir(), localcluster.Kubectl); isFile(kubectl) {
		return kubectl
	}
	kubectlOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		var dir string
		dir, kubectlErr = localcluster.EnsureBinaries(ctx, RepoRoot(), localcluster.Kubectl)
		kubectlPath = filepath.Join(dir, localcluster.Kubectl)
	})
	if kubectlErr != nil {
		t.Fatalf("building kubectl: %v", kubectlErr)
	}
	return kubectlPath
}

var (
	kubectlOnce sync.Once
	kubectlPath string
	kubectlErr  error
)

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
