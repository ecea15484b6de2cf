// Package localcluster runs a real Kubernetes control plane (etcd,
// kube-apiserver and kube-controller-manager) as local processes on loopback,
// for demos and integration tests of the Book controller.
//
// It exists because fake clients and envtest-like setups without a controller
// manager cannot show behaviour that needs real controllers, such as garbage
// collection of objects whose owner was deleted, namespace deletion, or
// service account tokens. There are no nodes: pods are never scheduled.
//
// The binaries come from hack/build-tools.sh, which builds the versions pinned
// in hack/tools/*/go.mod. A Cluster started by a test dies with the test
// process (on Linux); one started with Options.Detached outlives it, keeps
// its pid files in Options.Dir, and is found again with Attach (this is what
// hack/local-up.sh does).
package localcluster
