//go:build linux

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

package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ydzs.io/book-controller/internal/poll"
)

// A check that something did not happen means something only once it is
// known that it could have: the tests wait for a marker, an effect that
// must come after the moment in question, instead of waiting a while.

// WaitForWriteAfter waits until the API server's audit log shows a write of
// a Book, a ConfigMap or an Event in ns by the replica identity, received
// after after, and returns it; it fails the test if p exits first. A test
// that must show a replica still at work past some moment (a drain under
// way after SIGTERM) waits for this.
func (e *Env) WaitForWriteAfter(t testing.TB, ns, identity string, after time.Time, p *Process) AuditWrite {
	t.Helper()
	var found AuditWrite
	poll.Eventually(t, fmt.Sprintf("a write by %s received after %s", identity, after.Format("15:04:05.000")),
		250*time.Millisecond, Timeout, func(context.Context) error {
			events, err := ReadAuditLog(e.Cluster.AuditLogPath())
			if err != nil {
				t.Fatalf("reading the audit log: %v", err)
			}
			for _, w := range ControllerWrites(events, ns) {
				if w.Writer == identity && w.At.After(after) {
					found = w
					return nil
				}
			}
			if !p.Running() {
				t.Fatalf("%s exited with no write received after %s:\n%s", p.Name, after.Format("15:04:05.000"), p.Tail(20))
			}
			return fmt.Errorf("none yet")
		})
	return found
}

// ThroughProxy sends a request of its own through proxy (a dry-run create
// of a ConfigMap) and waits until the API server has recorded it: past that
// point, what the proxy passes on reaches the API server, so that a check
// that nothing of another client came through it means something.
func (e *Env) ThroughProxy(t testing.TB, proxy *Proxy) {
	t.Helper()
	cfg := e.RESTConfig()
	cfg.Host = "https://" + proxy.Addr()
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("through-proxy-%d", time.Now().UnixNano())
	Eventually(t, "a request through the proxy to be answered", func(ctx context.Context) error {
		_, err := client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	// Answered, so recorded (the audit log's blocking mode writes before
	// the answer); AuditLog then waits for what began before it.
	for _, ev := range e.AuditLog(t) {
		if ref := ev.ObjectRef; ref != nil && ref.Name == name {
			return
		}
	}
	t.Fatalf("the request through the proxy, answered, is not in the audit log")
}
