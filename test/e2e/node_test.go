//go:build e2e && linux

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

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/test/integration/framework"
)

// hostResidue is what a node leaves on the host if Stop does not clean up:
// processes in its cgroups, its cgroup directories, mounts under its data
// directory, network namespaces (its own, lcnode, and the pods') and its
// bridge, which must never be on the host's network at all.
type hostResidue struct {
	pids       []int
	cgroups    []string
	mounts     []string
	netns      int
	nodeNetns  bool
	netnsMount bool
	bridge     bool
	extraLinks []string
}

func residue(dir string) hostResidue {
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/localcluster-node")
	links, _ := filepath.Glob("/var/log/containers/*")
	var ours []string
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir) {
			ours = append(ours, l)
		}
	}
	return hostResidue{
		pids:       localcluster.NodeCgroupPids(),
		cgroups:    cgroups,
		mounts:     localcluster.MountsUnder(dir),
		netns:      countNetNamespaces(),
		nodeNetns:  localcluster.NodeNetnsExists(),
		netnsMount: len(localcluster.MountsUnder("/run/netns")) > 0,
		bridge:     localcluster.BridgeExists(),
		extraLinks: ours,
	}
}

// countNetNamespaces counts the distinct network namespaces of the
// machine's processes: a pod's namespace outlives Stop only if a process
// or a bind mount holds it, and the mounts are checked separately.
func countNetNamespaces() int {
	seen := map[string]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*/ns/net")
	for _, p := range procs {
		if target, err := os.Readlink(p); err == nil {
			seen[target] = true
		}
	}
	return len(seen)
}

// checkClean fails the test for anything the node left behind, compared
// with before (netns: the count of namespaces before the node started).
func checkClean(t *testing.T, dir string, before hostResidue) {
	t.Helper()
	after := residue(dir)
	if len(after.pids) > 0 {
		t.Errorf("processes left in the node's cgroups: %v", after.pids)
	}
	if len(after.cgroups) > 0 {
		t.Errorf("cgroups left: %v", after.cgroups)
	}
	if len(after.mounts) > 0 {
		t.Errorf("mounts left under %s: %v", dir, after.mounts)
	}
	if after.netns > before.netns {
		t.Errorf("%d network namespaces after, %d before", after.netns, before.netns)
	}
	if after.nodeNetns {
		t.Errorf("the node's network namespace %s is still there (ip netns list)", localcluster.NodeNetns)
	}
	if after.netnsMount && !before.netnsMount {
		t.Error("/run/netns is still a mount point (ip netns made it one for the node)")
	}
	if after.bridge {
		t.Error("the node's bridge is on the host's network")
	}
	if len(after.extraLinks) > 0 {
		t.Errorf("the kubelet's log links left in /var/log/containers: %v", after.extraLinks)
	}
}

// TestClusterUpNodeAndDown runs hack/local-up.sh up --node (make
// cluster-up NODE=1) in a directory of its own, checks the node is Ready
// and how long that took, and that down leaves nothing on the host.
func TestClusterUpNodeAndDown(t *testing.T) {
	root := framework.RepoRoot()
	dir := filepath.Join(t.TempDir(), "cluster")
	before := residue(dir)
	script := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(root, "hack/local-up.sh")}, args...)...)
		cmd.Env = append(os.Environ(), "LOCAL_CLUSTER_DIR="+dir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("local-up.sh %s:\n%s", strings.Join(args, " "), out.String())
		if err != nil {
			t.Fatalf("local-up.sh %s: %v", strings.Join(args, " "), err)
		}
		return out.String()
	}
	t.Cleanup(func() {
		if c, err := localcluster.Attach(dir); err == nil && len(c.Pids()) > 0 {
			_ = c.Stop()
		}
	})
	start := time.Now()
	out := script("up", "--node")
	t.Logf("cluster-up --node took %s (binaries already built by this test's setup)", time.Since(start).Round(100*time.Millisecond))
	if !strings.Contains(out, "make deploy IMG="+localcluster.RegistryHost) {
		t.Errorf("up --node does not say how to deploy:\n%s", out)
	}
	c, err := localcluster.Attach(dir)
	if err != nil {
		t.Fatal(err)
	}
	if pids := c.Pids(); len(pids) != len(c.Components()) {
		t.Fatalf("after up --node, running %v; want all of %v", pids, c.Components())
	}
	if len(localcluster.NodeCgroupPids()) == 0 {
		t.Error("no process in the node's cgroups while it runs")
	}
	checkNetns(t, c)
	script("down")
	checkClean(t, dir, before)
}

// checkNetns checks where the node's network lives while it runs: the
// kubelet and containerd in the node's own network namespace, not the
// host's; the pods' bridge there and not on the host.
func checkNetns(t *testing.T, c *localcluster.Cluster) {
	t.Helper()
	if !localcluster.NodeNetnsExists() {
		t.Errorf("no network namespace %s while the node runs", localcluster.NodeNetns)
	}
	if localcluster.BridgeExists() {
		t.Error("the pods' bridge is on the host's network; it belongs in the node's namespace")
	}
	// 3 is NET_ADDR_SET: an address of its own, which ports joining and
	// leaving do not change under the pods' ARP entries.
	assign, err := exec.Command("ip", "netns", "exec", localcluster.NodeNetns, "cat", "/sys/class/net/lcnode0/addr_assign_type").CombinedOutput()
	if got := strings.TrimSpace(string(assign)); err != nil || got != "3" {
		t.Errorf("the pods' bridge's addr_assign_type is %q (%v), want 3: an address set at its creation", got, err)
	}
	host, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	nodeNS, err := os.Stat("/run/netns/" + localcluster.NodeNetns)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{localcluster.Kubelet, localcluster.Containerd} {
		pid := c.Pids()[name]
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		st, serr := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid))
		switch {
		case err != nil || serr != nil:
			t.Errorf("%s (pid %d): %v %v", name, pid, err, serr)
		case ns == host:
			t.Errorf("%s (pid %d) runs in the host's network namespace %s", name, pid, ns)
		case !os.SameFile(st, nodeNS):
			t.Errorf("%s (pid %d) runs in network namespace %s, not %s", name, pid, ns, localcluster.NodeNetns)
		}
	}
}
