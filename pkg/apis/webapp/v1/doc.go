// Package v1 is version v1 of the webapp.ydzs.io API group: the Book custom
// resource, deprecated in favour of v2 and still served. Its Book converts
// to and from the hub, v2 (conversion.go), without losing what v1 cannot
// say. The Go types here are the single source for the generated clients
// (pkg/generated), the deep-copy functions and the v1 version of the CRDs in
// manifests/.
//
// +k8s:deepcopy-gen=package
// +groupName=webapp.ydzs.io
package v1
