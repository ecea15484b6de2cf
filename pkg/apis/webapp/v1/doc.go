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

// Package v1 is version v1 of the webapp.ydzs.io API group: the Book custom
// resource. The Go types here are the single source for the generated
// clients (pkg/generated), the deep-copy functions and the v1 version of the
// CRDs in manifests/.
// fork:begin v2
// It is deprecated in favour of v2 and still served: a v1 price is a whole
// number of an unnamed currency and cannot say 19.99 EUR, where v2 has a
// decimal price in an ISO 4217 currency, and authors. Its Book converts to
// and from the hub, v2 (conversion.go), without losing what v1 cannot say,
// and the API server warns on every v1 request (hack/crdgen marks v1
// deprecated in manifests/crd.yaml).
// fork:end v2
//
// +k8s:deepcopy-gen=package
// +groupName=webapp.ydzs.io
package v1
