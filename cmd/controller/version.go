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

package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// The version and commit the binary was built from, stamped in by the
// linker: every build of ours passes `hack/version.sh --ldflags` (make build,
// make demo, make image, the Dockerfile, the tests' BuildController). Empty
// in a plain `go build` or `go run`.
var (
	gitVersion string
	gitCommit  string
)

// version is the version stamped in at build time, else the module version
// the binary was built from (a tag, or a pseudo-version, when built as a
// dependency), else the VCS revision, else "devel". It goes into the user
// agent, which the API server's audit log records with every request.
func version() string {
	if gitVersion != "" {
		return gitVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev := vcsRevision(info); len(rev) >= 12 {
		return rev[:12]
	}
	return "devel"
}

// commit is the commit stamped in at build time, else the VCS revision Go
// recorded (a build inside a git checkout without -buildvcs=false), else
// "unknown".
func commit() string {
	if gitCommit != "" {
		return gitCommit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		if rev := vcsRevision(info); rev != "" {
			return rev
		}
	}
	return "unknown"
}

func vcsRevision(info *debug.BuildInfo) string {
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

// versionLine is what --version prints, e.g.
// "book-controller v0.9.0-12-gabc1234 (commit abc1234…, built with go1.26.8)".
func versionLine() string {
	return fmt.Sprintf("book-controller %s (commit %s, built with %s)", version(), commit(), runtime.Version())
}
