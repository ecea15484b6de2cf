// Package e2e runs the controller as the lesson deploys it: the image built
// without Docker (make image image-push) into the local registry, the CRD
// and manifests applied (make install, make deploy), and the pods run by a
// real kubelet and containerd on the local cluster's node
// (localcluster.Options.Node). The tests check on the node itself (/proc,
// cgroups) and in the API server's audit log what the controller does in a
// pod: its security context, its service account token, its RBAC, its
// metrics' authorization, leader election across a rollout and a pod
// deletion, and an OOM kill under a too-small memory limit.
//
// make test-e2e runs them; they need root (the node's cgroups and network),
// runc (hack/install-runc.sh) and port 5000 free, and one node per machine,
// so they are not part of make test.
package e2e
