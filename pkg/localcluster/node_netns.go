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
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// The node lives in one network namespace of its own, NodeNetns: containerd,
// the kubelet, the CNI bridge with the pods' gateway and the kubernetes
// Service's address, and (through their own namespaces, made by CNI inside
// it) the pods. The host keeps only its loopback; the forwarder
// (node-helper forward) joins the two, so that nothing the node does is
// ever addressed to anything but 127.0.0.1 on the host.

// inNodeNetns runs f on an OS thread that has entered the node's network
// namespace, in a goroutine of its own: sockets f creates, and processes it
// starts, belong to that namespace. If the thread cannot go back, it stays
// locked and the runtime ends it with the goroutine, so nothing else ever
// runs in the wrong namespace.
func inNodeNetns(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := enterNodeNetns(f)
		if back {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// nodeNamespace starts processes (containerd, the kubelet) in the node's
// network namespace.
type nodeNamespace struct{}

func (nodeNamespace) enter(start func() error, threadLocked bool) error {
	if threadLocked {
		return inNodeNetnsLocked(start)
	}
	return inNodeNetns(start)
}

// inNodeNetnsLocked is inNodeNetns on the calling goroutine's thread, which
// is locked to it for good (the forker's).
func inNodeNetnsLocked(f func() error) error {
	_, err := enterNodeNetns(f)
	return err
}

// enterNodeNetns runs f with the current, locked thread in the node's
// network namespace, and reports whether the thread is back in its own.
func enterNodeNetns(f func() error) (back bool, err error) {
	ns, err := os.Open(nodeNetnsPath)
	if err != nil {
		return true, fmt.Errorf("localcluster: the node's network namespace: %w", err)
	}
	defer ns.Close()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return true, err
	}
	defer self.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("localcluster: entering network namespace %s: %w", NodeNetns, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		return false, errors.Join(ferr, fmt.Errorf("localcluster: leaving network namespace %s: %w", NodeNetns, err))
	}
	return true, ferr
}

// DialNode connects to addr inside the node's network namespace: a pod's
// address, or the kubelet's healthz port. For tests and checks; the
// connection never touches the host's network.
func DialNode(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := inNodeNetns(func() (err error) {
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// createNetns creates the node's network namespace with its loopback up and
// the pods' bridge in it, carrying the pods' gateway and the kubernetes
// Service's address, before the CNI plugin would create the bridge without
// the latter. IP forwarding is per namespace and off in a new one, and the
// bridge plugin is told isGateway: false: pods reach the bridge's own
// addresses and each other, and nothing else.
func createNetns() error {
	if err := ip("netns", "add", NodeNetns); err != nil {
		return err
	}
	in := func(args ...string) error { return ip(append([]string{"-n", NodeNetns}, args...)...) }
	if err := in("link", "set", "lo", "up"); err != nil {
		return err
	}
	if err := in("link", "add", "name", nodeBridge, "type", "bridge"); err != nil {
		return err
	}
	// A bridge without an address of its own takes the lowest of its
	// ports', so it changed as pods came and went, and the pods' ARP
	// entries for their gateway then pointed at a MAC nobody answered
	// for: their requests to the API server went unanswered for 5 to 40 s,
	// a released Lease among them (docs/node.md).
	if err := in("link", "set", nodeBridge, "address", bridgeMAC); err != nil {
		return err
	}
	for _, a := range []string{fmt.Sprintf("%s/%d", podGateway, podSubnetBits), apiServiceIP + "/32"} {
		if err := in("addr", "add", a, "dev", nodeBridge); err != nil {
			return err
		}
	}
	return in("link", "set", nodeBridge, "up")
}

// deleteNetns removes the node's namespace (its bind mount; the namespace
// itself, with the bridge in it, goes once the last process and socket in
// it are gone), and /run/netns's own mount when ip netns made it for us and
// nothing else is in it.
func deleteNetns(unmountDir bool) error {
	var err error
	if NodeNetnsExists() {
		err = ip("netns", "delete", NodeNetns)
	}
	if !unmountDir || !isMountPoint(netnsDir) {
		return err
	}
	if entries, _ := os.ReadDir(netnsDir); len(entries) > 0 {
		return err
	}
	if uerr := syscall.Unmount(netnsDir, syscall.MNT_DETACH); uerr != nil {
		return errors.Join(err, fmt.Errorf("localcluster: unmounting %s: %w", netnsDir, uerr))
	}
	return err
}

// NodeNetnsExists reports whether the node's network namespace is there;
// false once Stop has cleaned up.
func NodeNetnsExists() bool {
	_, err := os.Stat(nodeNetnsPath)
	return !errors.Is(err, fs.ErrNotExist)
}

// BridgeExists reports whether the node's pod bridge is on the host's
// network, where it must never be (it lives in NodeNetns).
func BridgeExists() bool {
	_, err := os.Stat("/sys/class/net/" + nodeBridge)
	return err == nil
}

func isMountPoint(dir string) bool {
	mounts, err := readMountInfo()
	if err != nil {
		return false
	}
	for _, m := range mounts {
		if m.point == dir {
			return true
		}
	}
	return false
}
