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
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// profiler is the CPU profiles of kube-apiserver and of the controller
// being taken while a backlog phase runs (-profile): they answer where each
// one's CPU goes in one phase against another, which the phases' CPU seconds
// alone cannot.
type profiler struct {
	done chan error
	n    int
}

// startProfile asks kube-apiserver (its /debug/pprof/profile, served with
// --profiling, the default) and, when pr serves profiles, the controller
// (--pprof-bind-address) for a CPU profile of the next -profile-seconds,
// and writes them to <-profile>/r<round>-<phase>-kube-apiserver.pprof and
// -controller.pprof. Without -profile it does nothing.
func (e *env) startProfile(ctx context.Context, phase string, pr *proc) *profiler {
	p := &profiler{done: make(chan error, 2)}
	if e.o.profileDir == "" {
		return p
	}
	if err := os.MkdirAll(e.o.profileDir, 0o755); err != nil {
		p.n = 1
		p.done <- fmt.Errorf("-profile: %w", err)
		return p
	}
	secs := int(e.o.profileFor / time.Second)
	p.take(e, phase, "kube-apiserver", func() ([]byte, error) {
		return e.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(secs)).Timeout(e.o.profileFor + time.Minute).DoRaw(ctx)
	})
	if pr.pprofAddr != "" {
		p.take(e, phase, "controller", func() ([]byte, error) {
			// The controller opens its pprof port a moment after it starts.
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pr.pprofAddr, secs)
			var raw []byte
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				var err error
				raw, err = httpGet(ctx, url, e.o.profileFor+time.Minute)
				if errors.Is(err, syscall.ECONNREFUSED) {
					return false, nil
				}
				return true, err
			})
			return raw, err
		})
	}
	return p
}

// take fetches one profile in the background and writes it as
// r<round>-<phase>-<who>.pprof.
func (p *profiler) take(e *env, phase, who string, fetch func() ([]byte, error)) {
	p.n++
	go func() {
		raw, err := fetch()
		if err != nil {
			p.done <- fmt.Errorf("%s's CPU profile during %s: %w", who, phase, err)
			return
		}
		path := filepath.Join(e.o.profileDir, fmt.Sprintf("%s-%s.pprof", e.logName(phase), who))
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			p.done <- fmt.Errorf("writing %s: %w", path, err)
			return
		}
		fmt.Printf("bench: %s's CPU profile of %s: %s\n", who, phase, path)
		p.done <- nil
	}()
}

// wait returns when every profile is written, with the first error.
func (p *profiler) wait() error {
	var first error
	for range p.n {
		if err := <-p.done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// httpGet is the body of a GET that must answer 200 within timeout.
func httpGet(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
	}
	return body, nil
}
