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

// Package v2 is version v2 of the webapp.ydzs.io API group: the Book custom
// resource with a price in decimal of a named ISO 4217 currency, and its
// authors, the version the controller uses and the API server stores. The
// Go types here are the single source for the generated clients
// (pkg/generated), the deep-copy functions and the v2 version of
// manifests/crd.yaml.
// fork:begin v2
//
// v2 is the hub of conversion: v1, still served and deprecated, converts to
// and from it (package v1's Book.ConvertTo and Book.ConvertFrom), and a v1
// client's Book keeps what v1 cannot say in an annotation
// (docs/api-versions.md).
// fork:end v2
//
// +k8s:deepcopy-gen=package
// +groupName=webapp.ydzs.io
package v2
