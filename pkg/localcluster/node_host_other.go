//go:build !linux

package localcluster

import (
	"context"
	"errors"
	"net"
	"time"
)

// errNodeNeedsLinux is what Options.Node fails with elsewhere: the node's
// kubelet, containerd and runc need Linux cgroups and namespaces.
var errNodeNeedsLinux = errors.New("localcluster: Options.Node needs Linux (cgroups, network namespaces, runc)")

func (n *nodeState) saveHost() error          { return errNodeNeedsLinux }
func (n *nodeState) restoreHost(string) error { return nil }
func createCgroup(string) error               { return errNodeNeedsLinux }
func joinCgroup(string, int) error            { return errNodeNeedsLinux }
func createNetns() error                      { return errNodeNeedsLinux }
func deleteNetns(bool) error                  { return nil }
func removeCgroups() error                    { return nil }
func killCgroups(time.Duration) error         { return nil }
func unmountUnder(string) error               { return nil }

// NodeCgroupPids is empty: no node runs on this system.
func NodeCgroupPids() []int { return nil }

// MountsUnder is empty: no node runs on this system.
func MountsUnder(string) []string { return nil }

// NodeNetnsExists is false: no node runs on this system.
func NodeNetnsExists() bool { return false }

// DialNode fails: no node runs on this system.
func DialNode(context.Context, string, string) (net.Conn, error) { return nil, errNodeNeedsLinux }

// BridgeExists is false: no node runs on this system.
func BridgeExists() bool { return false }

// ContainerPids fails: no node runs on this system.
func ContainerPids(string, string) ([]int, error) { return nil, errNodeNeedsLinux }
