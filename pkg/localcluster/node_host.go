//go:build linux

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
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the node changes on the host, and how Stop puts it back. The kubelet
// and containerd are root daemons written for a machine of their own; the
// node keeps them in its own cgroup, directories and network namespace, and
// records what it could not keep them off (sysctls, a few fixed paths) so
// that Stop restores it.

// kubeletSysctls are the host settings the kubelet sets at start
// (the kubelet's setupKernelTunables, kubernetes/pkg/kubelet/cm); Stop writes the values back.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostPaths are the fixed paths the kubelet, containerd and the CNI plugins
// write to whatever their configuration says: /var/log/containers (the
// kubelet's log links), /run/containerd/s (shim sockets), /var/lib/cni (the
// CNI result cache), and the rest for safety. Those that did not exist
// before the node started are removed by Stop.
var hostPaths = []string{
	"/var/log/containers", "/run/containerd", "/var/lib/cni", "/var/lib/kubelet", "/var/log/pods",
	"/opt/containerd", "/opt/cni", "/etc/cni", "/var/run/nri", "/usr/libexec/kubernetes", "/etc/kubernetes",
	netnsDir,
}

// saveHost records what Stop must restore, before anything changes it.
func (n *nodeState) saveHost() error {
	n.Sysctls = map[string]string{}
	for _, key := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + key)
		if err != nil {
			return fmt.Errorf("localcluster: reading sysctl %s: %w", key, err)
		}
		n.Sysctls[key] = strings.TrimSpace(string(b))
	}
	n.UnmountNetnsDir = !isMountPoint(netnsDir)
	n.CreatedPaths = nil
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			n.CreatedPaths = append(n.CreatedPaths, p)
		}
	}
	return nil
}

// restoreHost writes the sysctls back and removes the paths the node created,
// and the kubelet's log links that point into dir in a /var/log/containers
// that was there before.
func (n *nodeState) restoreHost(dir string) error {
	var errs []error
	for key, v := range n.Sysctls {
		if err := os.WriteFile("/proc/sys/"+key, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("localcluster: restoring sysctl %s=%s: %w", key, v, err))
		}
	}
	for _, p := range n.CreatedPaths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			_ = os.Remove(l)
		}
	}
	return errors.Join(errs...)
}

// cgroupMounts are the mount points of every cgroup hierarchy (v1
// controllers, name=systemd, the v2 unified one).
func cgroupMounts() ([]string, error) {
	mounts, err := readMountInfo()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.fsType == "cgroup" || m.fsType == "cgroup2" {
			out = append(out, m.point)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("localcluster: no cgroup hierarchy mounted: the node needs /sys/fs/cgroup")
	}
	return out, nil
}

// createCgroup creates nodeCgroup/sub in every hierarchy. A new cpuset
// cgroup in v1 has no CPUs or memory nodes until given its parent's.
func createCgroup(sub string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		for _, rel := range []string{nodeCgroup, filepath.Join(nodeCgroup, sub)} {
			dir := filepath.Join(m, rel)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("localcluster: creating cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f)); err == nil && !isCgroup2(m) {
					_ = os.WriteFile(filepath.Join(dir, f), b, 0o644)
				}
			}
		}
	}
	return nil
}

func isCgroup2(mount string) bool {
	_, err := os.Stat(filepath.Join(mount, "cgroup.controllers"))
	return err == nil
}

// joinCgroup moves pid into nodeCgroup/sub in every hierarchy; its children
// (containerd's shims) are born there.
func joinCgroup(sub string, pid int) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		f := filepath.Join(m, nodeCgroup, sub, "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("localcluster: moving pid %d into %s: %w", pid, f, err)
		}
	}
	return nil
}

// cgroupDirs lists nodeCgroup and everything below it in every hierarchy,
// deepest first, as rmdir needs them.
func cgroupDirs() []string {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil
	}
	var dirs []string
	for _, m := range mounts {
		_ = filepath.WalkDir(filepath.Join(m, nodeCgroup), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// NodeCgroupPids returns the pids of every process in the node's cgroups:
// containerd, the kubelet, the shims and the pods' processes. Empty once
// Stop has cleaned up.
func NodeCgroupPids() []int {
	seen := map[int]bool{}
	var pids []int
	for _, d := range cgroupDirs() {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// killCgroups kills every process in the node's cgroups until none is left;
// a shim may fork while it is being killed, hence the loop.
func killCgroups(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := NodeCgroupPids()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localcluster: processes %v still in cgroup %s after SIGKILL", pids, nodeCgroup)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes the node's cgroups, which must hold no process.
func removeCgroups() error {
	var errs []error
	for _, d := range cgroupDirs() {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("localcluster: removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

type mountInfo struct {
	point  string
	fsType string
}

// readMountInfo parses /proc/self/mountinfo: field 5 is the mount point, the
// field after " - " the file system type. Octal escapes (\040 for a space)
// are decoded.
func readMountInfo() ([]mountInfo, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, typ := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(typ) < 1 {
			continue
		}
		point, err := strconv.Unquote(`"` + strings.ReplaceAll(fields[4], `"`, `\"`) + `"`)
		if err != nil {
			point = fields[4]
		}
		out = append(out, mountInfo{point: point, fsType: typ[0]})
	}
	return out, sc.Err()
}

// MountsUnder returns the mount points at or below dir, latest first: the
// containers' root file systems, their shm and volumes, the pods' network
// namespaces. Empty once Stop has cleaned up.
func MountsUnder(dir string) []string {
	mounts, err := readMountInfo()
	if err != nil {
		return nil
	}
	var out []string
	for i := len(mounts) - 1; i >= 0; i-- {
		p := mounts[i].point
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// unmountUnder detaches every mount below dir; a network namespace's bind
// mount going away frees the namespace once no process is in it.
func unmountUnder(dir string) error {
	var errs []error
	for _, p := range MountsUnder(dir) {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("localcluster: unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// ip runs iproute2's ip, which every Linux with a kubelet has.
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("localcluster: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ContainerPids returns the pids of a container the node runs, from its
// cgroup: the kubelet names a pod's cgroup pod<UID> (below its QoS class's,
// except for Guaranteed pods) and the runtime names the container's by its
// ID. containerID is the status's, with or without "containerd://".
func ContainerPids(podUID, containerID string) ([]int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		for _, pattern := range []string{
			filepath.Join(m, nodeCgroup, "kubepods", "*", "pod"+podUID, id, "cgroup.procs"),
			filepath.Join(m, nodeCgroup, "kubepods", "pod"+podUID, id, "cgroup.procs"),
		} {
			matches, _ := filepath.Glob(pattern)
			for _, f := range matches {
				b, err := os.ReadFile(f)
				if err != nil {
					continue
				}
				var pids []int
				for _, s := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(s); err == nil {
						pids = append(pids, pid)
					}
				}
				if len(pids) > 0 {
					return pids, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("localcluster: no process in the cgroup of container %s of pod %s", id, podUID)
}
