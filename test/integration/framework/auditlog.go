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
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/localcluster"
)

// AuditLog reads the API server's audit log once it holds the answer to
// every audited request the API server had begun when AuditLog was called,
// and returns the answered requests (ReadAuditLog).
//
// The API server records a request when it begins and again when it has
// answered (pkg/localcluster keeps both stages), and a write begun just
// before this call can be answered after a later one. So AuditLog sends a
// request of its own, a dry-run create (the sentinel), and waits until the
// sentinel's answer is recorded and so is the answer to every request whose
// beginning is recorded before the sentinel's. A request begun by an API
// server process that has since been killed is never answered: requests
// received before the running kube-apiserver started are not waited for.
func (e *Env) AuditLog(t testing.TB) []auditv1.Event {
	t.Helper()
	path := e.Cluster.AuditLogPath()
	// The API server takes a request's audit ID from its Audit-ID header:
	// the beginning of a create names no object yet, only its ID.
	sentinel := uuid.NewUUID()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audit-sentinel-" + string(sentinel), Namespace: metav1.NamespaceDefault}}
	if err := e.Kube.CoreV1().RESTClient().Post().Namespace(metav1.NamespaceDefault).Resource("configmaps").
		Param("dryRun", metav1.DryRunAll).SetHeader("Audit-ID", string(sentinel)).Body(cm).
		Do(context.Background()).Error(); err != nil {
		t.Fatalf("writing the audit log's sentinel: %v", err)
	}
	started, err := e.apiServerStarted()
	if err != nil {
		t.Fatal(err)
	}
	var answered []auditv1.Event
	poll.Eventually(t, "the audit log to record the answer to every request begun before the sentinel "+string(sentinel),
		50*time.Millisecond, Timeout, func(context.Context) error {
			all, err := readAuditEvents(path)
			if err != nil {
				t.Fatalf("reading the audit log: %v", err)
			}
			if err := pendingBefore(all, sentinel, started); err != nil {
				return err
			}
			answered = completed(all)
			return nil
		})
	return answered
}

// pendingBefore is nil once the sentinel's answer is in events and so is
// the answer to every request whose beginning is recorded before the
// sentinel's, received since started; else it says what is missing.
func pendingBefore(events []auditv1.Event, sentinel types.UID, started time.Time) error {
	answers := map[types.UID]bool{}
	for _, ev := range events {
		if isAnswer(ev.Stage) {
			answers[ev.AuditID] = true
		}
	}
	var begun []auditv1.Event
	for _, ev := range events {
		if ev.Stage != auditv1.StageRequestReceived {
			continue
		}
		if ev.AuditID == sentinel {
			if !answers[ev.AuditID] {
				return fmt.Errorf("the sentinel's beginning is recorded, not yet its answer")
			}
			var pending []string
			for _, b := range begun {
				if !answers[b.AuditID] && !b.RequestReceivedTimestamp.Time.Before(started) {
					pending = append(pending, fmt.Sprintf("%s %s at %s", b.Verb, b.RequestURI, b.RequestReceivedTimestamp.Format("15:04:05.000000")))
				}
			}
			if len(pending) > 0 {
				return fmt.Errorf("%d requests begun before the sentinel not yet answered: %s", len(pending), strings.Join(pending, ", "))
			}
			return nil
		}
		begun = append(begun, ev)
	}
	return fmt.Errorf("%d events, none of the sentinel's", len(events))
}

// apiServerStarted is when the running kube-apiserver process started, to
// within a clock tick, from /proc.
func (e *Env) apiServerStarted() (time.Time, error) {
	pid, ok := e.Cluster.Pids()[localcluster.KubeAPIServer]
	if !ok {
		return time.Time{}, fmt.Errorf("kube-apiserver is not running: the audit log cannot be read up to now")
	}
	return processStarted(pid)
}

// processStarted reads a process's start time from /proc/PID/stat (field 22,
// in clock ticks since boot; 100 a second on Linux) and the boot time from
// /proc/uptime.
func processStarted(pid int) (time.Time, error) {
	now := time.Now()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return time.Time{}, err
	}
	// The command name, field 2, is in parentheses and may hold anything.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 20 {
		return time.Time{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want 20 or more", pid, len(fields))
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	uptime, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return time.Time{}, err
	}
	up, err := strconv.ParseFloat(strings.Fields(string(uptime))[0], 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("/proc/uptime: %w", err)
	}
	boot := now.Add(-time.Duration(up * float64(time.Second)))
	return boot.Add(time.Duration(ticks) * (time.Second / 100)), nil
}
