package main

import (
	"runtime/debug"
)

// version is the module version the binary was built from (a tag, or a
// pseudo-version), else the VCS revision, else "devel". It goes into the
// user agent, which the API server's audit log records with every request.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return s.Value[:12]
		}
	}
	return "devel"
}
