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
