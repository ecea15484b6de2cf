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
