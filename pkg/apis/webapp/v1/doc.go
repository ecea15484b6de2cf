// Package v1 is version v1 of the webapp.ydzs.io API group: the Book custom
// resource. The Go types here are the single source for the generated clients
// (pkg/generated), the deep-copy functions and manifests/crd.yaml.
//
// +k8s:deepcopy-gen=package
// +groupName=webapp.ydzs.io
package v1
