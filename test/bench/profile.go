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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// profiler is a CPU profile of kube-apiserver being taken while a backlog
// phase runs (-profile): it answers where the API server's CPU goes in one
// phase against another, which the phases' CPU seconds alone cannot.
type profiler struct {
	done chan error
}

// startProfile asks kube-apiserver for a CPU profile of the next
// -profile-seconds (its /debug/pprof/profile, served with --profiling, the
// default) and writes it to <-profile>/r<round>-<phase>-kube-apiserver.pprof.
// Without -profile it does nothing.
func (e *env) startProfile(ctx context.Context, phase string) *profiler {
	p := &profiler{done: make(chan error, 1)}
	if e.o.profileDir == "" {
		p.done <- nil
		return p
	}
	go func() {
		if err := os.MkdirAll(e.o.profileDir, 0o755); err != nil {
			p.done <- fmt.Errorf("-profile: %w", err)
			return
		}
		secs := int(e.o.profileFor / time.Second)
		raw, err := e.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(secs)).Timeout(e.o.profileFor + time.Minute).DoRaw(ctx)
		if err != nil {
			p.done <- fmt.Errorf("kube-apiserver's CPU profile during %s: %w", phase, err)
			return
		}
		path := filepath.Join(e.o.profileDir, fmt.Sprintf("%s-kube-apiserver.pprof", e.logName(phase)))
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			p.done <- fmt.Errorf("writing %s: %w", path, err)
			return
		}
		fmt.Printf("bench: kube-apiserver's CPU profile of %s: %s\n", phase, path)
		p.done <- nil
	}()
	return p
}

// wait returns once the profile is written (or failed), so that it never
// spills into the next phase.
func (p *profiler) wait() error { return <-p.done }
