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

// Package docs holds the checks that keep the documentation true, so that
// no reviewer has to: links and anchors resolve; the paths, make targets,
// flags (with their defaults), metrics, Ready and event reasons, alerts and
// Go names the docs give exist; every metric, reason and alert the code
// defines is documented; `make help` lists every target; and comments in
// code and manifests cite files and functions that exist.
//
// Everything is derived from the tree: the Makefile's rules, the flag table
// of docs/flags.md (which cmd/controller's TestFlagsDocIsFresh holds to the
// flag set; hack/update-docs.sh rewrites it), the metrics, reasons and
// identifiers of the Go code, the PrometheusRule's alerts. Each finding
// names file:line and what to fix. docs_test.go runs every check on the
// repository, and on broken copies of a small tree under testdata/, each of
// which must fail.
package docs
