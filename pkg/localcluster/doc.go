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

// Package localcluster runs a real Kubernetes control plane (etcd,
// kube-apiserver and kube-controller-manager) as local processes on loopback,
// for demos and integration tests of the Book controller.
//
// It exists because fake clients and envtest-like setups without a controller
// manager cannot show behaviour that needs real controllers, such as garbage
// collection of objects whose owner was deleted, namespace deletion, or
// service account tokens. It runs no node, so pods are never scheduled,
// unless Options.Node adds one.
//
// The binaries come from hack/build-tools.sh, which builds the versions pinned
// in hack/tools/*/go.mod. A Cluster started by a test dies with the test
// process (on Linux); one started with Options.Detached outlives it, keeps
// its pid files in Options.Dir, and is found again with Attach (this is what
// hack/local-up.sh does).
package localcluster
