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

package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// probeClient skips TLS verification because it is used before the
// apiserver has written the certificate that would verify it, and for the
// controller manager, whose self-signed certificate nobody else trusts.
// Nothing secret is sent except to the loopback apiserver.
var probeClient = &http.Client{
	Timeout: 2 * time.Second,
	Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback readiness probe only
		DisableKeepAlives: true,
	},
}

// get returns the start of the body when url answers 200, otherwise an
// error with the status and the body, which for /readyz names the failing
// check.
func get(ctx context.Context, url, token string) (string, error) {
	return getWith(ctx, probeClient, url, token)
}

// getWith is get with another client.
// The kubelet's healthz is reached from inside the node's network namespace. // fork:line node
func getWith(ctx context.Context, client *http.Client, url, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// waitReady polls check until it passes, the process exits, or ctx ends.
// Exiting is checked first because a process that dies at once (a port in
// use, a bad flag) would otherwise only show up as a timeout.
func waitReady(ctx context.Context, p *process, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var lastErr error
	for {
		if !p.alive() {
			return p.exitError()
		}
		if lastErr = check(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localcluster: %s not ready after %s (%v): see %s", p.name, time.Since(start).Round(time.Second), lastErr, p.logPath)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
