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

// Command local-cluster starts, stops and reports a local Kubernetes control
// plane (etcd, kube-apiserver, kube-controller-manager) that outlives it, for
// demos and manual testing. hack/local-up.sh is the usual way to run it; all
// process flags live in pkg/localcluster, not here.
//
// Usage:
//
//	local-cluster [flags] up|down|status|apiserver-stop|apiserver-start
//
// -node adds a real node (containerd, kubelet, kube-scheduler, a registry // fork:line node
// on localhost:5000): see pkg/localcluster Options.Node. // fork:line node
//
// apiserver-stop kills kube-apiserver as a crash would, and apiserver-start
// starts it again on the same port and data: to watch a controller's
// retries back off in its log.
// The live view shows them too (docs/ui.md). // fork:line ui
//
// status exits 0 when the cluster runs, 1 when only part of it runs, and 3
// when it does not run (the LSB convention).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"ydzs.io/book-controller/pkg/localcluster"
)

const (
	exitFailed     = 1
	exitNotRunning = 3
)

func main() {
	dir := flag.String("dir", "_output/local-cluster", "data directory: etcd data, kubeconfig, logs and pid files")
	binDir := flag.String("bin-dir", "", "directory with etcd, kube-apiserver, kube-controller-manager; default: build them with hack/build-tools.sh")
	repoRoot := flag.String("repo-root", ".", "repository root, for hack/build-tools.sh when -bin-dir is empty")
	sharded := flag.Bool("sharded-list-and-watch", true, "enable kube-apiserver's alpha ShardedListAndWatch feature gate, which book-controller --shards needs")
	// fork:begin node
	node := flag.Bool("node", false, "add a node that runs pods: kube-scheduler, containerd, kubelet, a registry on "+localcluster.RegistryHost+" (needs root and runc)")
	// fork:end node
	timeout := flag.Duration("timeout", 15*time.Minute, "how long up may take, including a cold build of the binaries")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] up|down|status|apiserver-stop|apiserver-start\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	switch flag.Arg(0) {
	case "up":
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		opts := localcluster.Options{ShardedListAndWatch: *sharded}
		// fork:begin node
		opts.Node = *node
		// fork:end node
		err = up(ctx, abs, *binDir, *repoRoot, opts)
	case "down":
		err = down(abs)
	case "status":
		os.Exit(status(abs))
	case "apiserver-stop", "apiserver-start":
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		err = apiServer(ctx, abs, flag.Arg(0) == "apiserver-start")
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "local-cluster:", err)
	os.Exit(exitFailed)
}

func up(ctx context.Context, dir, binDir, repoRoot string, opts localcluster.Options) error {
	if c, err := localcluster.Attach(dir); err == nil {
		switch pids := c.Pids(); len(pids) {
		case len(c.Components()):
			// fork:begin node
			if hasNode := pids[localcluster.Kubelet] != 0; hasNode != opts.Node {
				return fmt.Errorf("local cluster already running in %s, with node: %v; run hack/local-up.sh down first to start one with node: %v", dir, hasNode, opts.Node)
			}
			// fork:end node
			fmt.Printf("local cluster already running in %s (%s)\n", dir, describe(pids))
			printUsage(c)
			return nil
		case 0: // stale state from a cluster that died: start afresh
		default:
			return fmt.Errorf("local cluster in %s only partly runs (%s): run hack/local-up.sh down first", dir, describe(pids))
		}
	}
	// Fresh data on every up: an old etcd database would bring back objects
	// from a previous demo.
	if err := removeData(dir); err != nil {
		return err
	}
	if binDir == "" {
		names := []string{localcluster.Etcd, localcluster.KubeAPIServer, localcluster.KubeControllerManager}
		// fork:begin node
		if opts.Node {
			names = append(names, localcluster.NodeBinaries)
		}
		// fork:end node
		var err error
		if binDir, err = localcluster.EnsureBinaries(ctx, repoRoot, names...); err != nil {
			return err
		}
	}
	start := time.Now()
	opts.Dir, opts.BinDir, opts.Detached = dir, binDir, true
	// fork:begin node
	if opts.Node {
		fmt.Println("starting etcd, kube-apiserver, kube-controller-manager, then the node: kube-scheduler, registry, containerd, kubelet")
	}
	// fork:end node
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("local cluster up in %s: %s (%s)\n", time.Since(start).Round(100*time.Millisecond), c.RESTConfig().Host, describe(c.Pids()))
	printUsage(c)
	return nil
}

func printUsage(c *localcluster.Cluster) {
	kubectl := filepath.Join(c.BinDir(), localcluster.Kubectl)
	where := "one is at " + kubectl
	if _, err := os.Stat(kubectl); err != nil {
		where = "hack/build-tools.sh kubectl builds one"
	}
	fmt.Printf(`
  export KUBECONFIG=%s
  kubectl get ns        # a kubectl within one minor version of the cluster; %s
`, c.KubeconfigPath(), where)
	// fork:begin node
	if c.Pids()[localcluster.Kubelet] != 0 {
		fmt.Printf(`  kubectl get nodes     # node %s runs pods; images come from the registry on %s:
  make image image-push IMG=%s/book-controller:dev
  make install && make deploy IMG=%s/book-controller:dev
`, localcluster.NodeName, localcluster.RegistryHost, localcluster.RegistryHost, localcluster.RegistryHost)
	}
	// fork:end node
	fmt.Printf(`
logs: %s
stop: hack/local-up.sh down
`, filepath.Join(c.Dir(), "logs"))
}

func down(dir string) error {
	c, err := localcluster.Attach(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Printf("no local cluster in %s\n", dir)
		return removeData(dir)
	}
	if err != nil {
		return err
	}
	pids := c.Pids()
	if err := c.Stop(); err != nil {
		return err
	}
	if err := removeData(dir); err != nil {
		return err
	}
	if len(pids) == 0 {
		fmt.Printf("local cluster was not running; removed %s\n", dir)
	} else {
		fmt.Printf("local cluster stopped (%s); removed %s\n", describe(pids), dir)
	}
	return nil
}

// apiServer kills kube-apiserver, or starts it again, in the cluster of dir.
func apiServer(ctx context.Context, dir string, start bool) error {
	c, err := localcluster.Attach(dir)
	if err != nil {
		return err
	}
	if !start {
		if err := c.KillAPIServer(); err != nil {
			return err
		}
		fmt.Println("kube-apiserver stopped; start it again with: hack/local-up.sh apiserver-start")
		return nil
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return err
	}
	fmt.Printf("kube-apiserver running again: %s\n", c.RESTConfig().Host)
	return nil
}

func status(dir string) int {
	c, err := localcluster.Attach(dir)
	if err != nil {
		fmt.Printf("local cluster not running (nothing in %s)\n", dir)
		return exitNotRunning
	}
	switch pids := c.Pids(); len(pids) {
	case len(c.Components()):
		fmt.Printf("local cluster running: %s (%s)\nKUBECONFIG=%s\n", c.RESTConfig().Host, describe(pids), c.KubeconfigPath())
		return 0
	case 0:
		fmt.Printf("local cluster not running (stale data in %s; hack/local-up.sh down removes it)\n", dir)
		return exitNotRunning
	default:
		fmt.Printf("local cluster partly running (%s): see %s, then hack/local-up.sh down\n", describe(pids), filepath.Join(dir, "logs"))
		return exitFailed
	}
}

// removeData deletes dir only if it is missing, empty, or holds what
// pkg/localcluster writes, so that a mistyped -dir cannot wipe anything else.
func removeData(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 && !exists(filepath.Join(dir, "cluster.json")) && !exists(filepath.Join(dir, "tokens.json")) {
		return fmt.Errorf("%s holds files that are not a local cluster's: remove it by hand or pick another -dir", dir)
	}
	return os.RemoveAll(dir)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func describe(pids map[string]int) string {
	var parts []string
	for name, pid := range pids {
		parts = append(parts, fmt.Sprintf("%s pid %d", name, pid))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
