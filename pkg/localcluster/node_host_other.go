//go:build !linux

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
	"net"
	"time"
)

// errNodeNeedsLinux is what Options.Node fails with elsewhere: the node's
// kubelet, containerd and runc need Linux cgroups and namespaces.
var errNodeNeedsLinux = errors.New("localcluster: Options.Node needs Linux (cgroups, network namespaces, runc)")

// nodeNamespace is the node's network namespace, which needs Linux.
type nodeNamespace struct{}

func (nodeNamespace) enter(func() error, bool) error { return errNodeNeedsLinux }

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
