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

package localcluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/localcluster"
)

// startCluster starts a cluster for one test and stops it at the end. The
// timeout covers a cold build of the binaries, which takes minutes.
func startCluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	return startClusterWith(t, localcluster.Options{})
}

func startClusterWith(t *testing.T, opts localcluster.Options) *localcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts etcd, kube-apiserver and kube-controller-manager (and may build them first); skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	opts.Dir = dir
	start := time.Now()
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		dumpLogs(t, dir)
		t.Fatal(err)
	}
	t.Logf("cluster ready in %s at %s", time.Since(start).Round(time.Millisecond), c.RESTConfig().Host)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c
}

// dumpLogs shows the end of each process log, since the cause of a failure
// is usually there and the directory is removed after the test.
func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		t.Logf("--- end of %s ---\n%s", l, strings.Join(lines, "\n"))
	}
}

func TestGarbageCollectorDeletesOrphanedDependent(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(c.RESTConfig())

	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gc-test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := client.CoreV1().ConfigMaps(ns.Name)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "child",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The serviceaccount controller runs too: the namespace gets its
	// default service account.
	poll.Eventually(t, "the serviceaccount controller to give "+ns.Name+" its default service account",
		200*time.Millisecond, 30*time.Second, func(ctx context.Context) error {
			_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
			return err
		})
	// Without Options.ShardedListAndWatch the API server ignores shard
	// selectors: what book-controller --shards checks for at start.
	checkShardSelector(t, client, ns.Name, "child", false)
	// A valid owner keeps its dependent.
	if _, err := cms.Get(ctx, "child", metav1.GetOptions{}); err != nil {
		t.Fatalf("child gone while its owner exists: %v", err)
	}

	background := metav1.DeletePropagationBackground
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	poll.Eventually(t, "the garbage collector to delete the child", 200*time.Millisecond, 30*time.Second, func(ctx context.Context) error {
		child, err := cms.Get(ctx, "child", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("child exists, deletionTimestamp %v", child.DeletionTimestamp)
	})
	t.Logf("garbage collector deleted the child %s after its owner", time.Since(deleted).Round(time.Millisecond))
}

func TestStopLeavesNoProcess(t *testing.T) {
	var log bytes.Buffer // only read after Stop, when no process writes to it
	c := startClusterWith(t, localcluster.Options{Log: &log})
	pids := c.Pids()
	for _, name := range []string{localcluster.Etcd, localcluster.KubeAPIServer, localcluster.KubeControllerManager} {
		if pids[name] == 0 {
			t.Fatalf("%s not running after Start: %v", name, pids)
		}
	}
	dir := c.Dir()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if running(pid) {
			t.Errorf("%s (pid %d) still runs after Stop", name, pid)
		}
	}
	if got := c.Pids(); len(got) != 0 {
		t.Errorf("Pids after Stop = %v, want none", got)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	for _, name := range []string{localcluster.Etcd, localcluster.KubeAPIServer, localcluster.KubeControllerManager} {
		if !strings.Contains(log.String(), "\n"+name+" | ") {
			t.Errorf("Options.Log has no line from %s", name)
		}
	}
	// A stopped cluster's Dir can be reused: same data, new processes.
	if _, err := os.Stat(filepath.Join(dir, "etcd")); err != nil {
		t.Errorf("etcd data gone after Stop of a cluster with a given Dir: %v", err)
	}
}

// TestKillAndRestart kills and restarts kube-apiserver and etcd; with
// Options.AuditLog, the audit log names the writer of each write across
// the restart, and with Options.ShardedListAndWatch the restarted API server
// still filters ConfigMaps (a built-in type) by shard selector.
func TestKillAndRestart(t *testing.T) {
	c := startClusterWith(t, localcluster.Options{AuditLog: true, ShardedListAndWatch: true})
	ctx := context.Background()
	cfg := c.RESTConfig()
	cfg.UserAgent = "audit-test (writer-1)"
	client := kubernetes.NewForConfigOrDie(cfg)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	getSurvivor := func() error {
		_, err := client.CoreV1().ConfigMaps("default").Get(ctx, "survivor", metav1.GetOptions{})
		return err
	}

	oldPid := c.Pids()[localcluster.KubeAPIServer]
	if err := c.KillAPIServer(); err != nil {
		t.Fatal(err)
	}
	if running(oldPid) {
		t.Fatalf("kube-apiserver pid %d runs after KillAPIServer", oldPid)
	}
	if err := getSurvivor(); err == nil {
		t.Fatal("Get succeeded with kube-apiserver killed")
	}
	start := time.Now()
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver restarted in %s", time.Since(start).Round(time.Millisecond))
	if err := getSurvivor(); err != nil {
		t.Fatalf("after StartAPIServer, with the old client: %v", err)
	}

	if err := c.KillEtcd(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	// The apiserver reconnects to etcd on its own, after a moment.
	poll.Eventually(t, "the object written before the restarts to be readable", 200*time.Millisecond, 30*time.Second,
		func(context.Context) error { return getSurvivor() })

	checkShardSelector(t, client, "default", "survivor", true)

	// Written after the restarts: the audit log is appended to, and a
	// Lease write is recorded with its body.
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-restart", Namespace: "default"}}
	if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, after, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	holder := "writer-1"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "audited", Namespace: "default"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	if _, err := client.CoordinationV1().Leases("default").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	events := readAuditLog(t, c.AuditLogPath())
	found := map[string]bool{}
	// Each write is recorded when it begins and when it is answered, which
	// test/integration/framework's AuditLog relies on.
	stages := map[types.UID][]auditv1.Stage{}
	for _, e := range events {
		if e.UserAgent != cfg.UserAgent || e.Verb != "create" || e.ObjectRef == nil {
			continue
		}
		stages[e.AuditID] = append(stages[e.AuditID], e.Stage)
		if e.Stage != auditv1.StageResponseComplete {
			continue // the beginning has no body yet
		}
		found[e.ObjectRef.Resource+"/"+e.ObjectRef.Name] = true
		if e.ObjectRef.Resource == "leases" && (e.RequestObject == nil || !strings.Contains(string(e.RequestObject.Raw), `"holderIdentity":"writer-1"`)) {
			t.Errorf("the Lease create is recorded without its body: %+v", e.RequestObject)
		}
		if e.ObjectRef.Resource == "configmaps" && e.RequestObject != nil {
			t.Errorf("a ConfigMap create is recorded with its body, want Metadata level")
		}
	}
	for _, want := range []string{"configmaps/survivor", "configmaps/after-restart", "leases/audited"} {
		if !found[want] {
			t.Errorf("the audit log has no create of %s by %q (%d events)", want, cfg.UserAgent, len(events))
		}
	}
	for id, got := range stages {
		if want := []auditv1.Stage{auditv1.StageRequestReceived, auditv1.StageResponseComplete}; !slices.Equal(got, want) {
			t.Errorf("request %s is recorded at the stages %v, want %v", id, got, want)
		}
	}
}

func readAuditLog(t *testing.T, path string) []auditv1.Event {
	t.Helper()
	if path == "" {
		t.Fatal("AuditLogPath is empty with Options.AuditLog set")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []auditv1.Event
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e auditv1.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("audit log line %q: %v", line, err)
		}
		events = append(events, e)
	}
	return events
}

func TestMissingBinariesError(t *testing.T) {
	_, err := localcluster.Start(context.Background(), localcluster.Options{Dir: t.TempDir(), BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "run hack/build-tools.sh") {
		t.Fatalf("Start with an empty BinDir: got %v, want an error saying to run hack/build-tools.sh", err)
	}
}

// running reports whether pid is a live process; a zombie is not.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// checkShardSelector lists ConfigMaps in every namespace twice, with the
// shard selector of the half of the hash space that holds namespace and
// with that of the other half. With sharded lists enabled the API server
// echoes the selector (ListMeta.ShardInfo) and name is only in the first
// list; without, both lists are whole and carry no ShardInfo.
func checkShardSelector(t *testing.T, client kubernetes.Interface, namespace, name string, enabled bool) {
	t.Helper()
	const half = "0x8000000000000000"
	lower := sharding.HexLess("0x"+sharding.HashField(namespace), half)
	ranges := map[bool]string{
		true:  "shardRange(object.metadata.namespace, '0x0000000000000000', '" + half + "')",
		false: "shardRange(object.metadata.namespace, '" + half + "', '0x10000000000000000')",
	}
	for _, holds := range []bool{true, false} {
		sel := ranges[lower == holds]
		list, err := client.CoreV1().ConfigMaps("").List(context.Background(), metav1.ListOptions{ShardSelector: sel})
		if err != nil {
			t.Fatalf("listing with %s: %v", sel, err)
		}
		found := false
		for _, cm := range list.Items {
			found = found || (cm.Namespace == namespace && cm.Name == name)
		}
		switch {
		case enabled && (list.ShardInfo == nil || list.ShardInfo.Selector != sel):
			t.Errorf("listing with %s: ShardInfo %+v, want the selector echoed", sel, list.ShardInfo)
		case !enabled && list.ShardInfo != nil:
			t.Errorf("listing with %s without the feature gate: ShardInfo %+v, want none", sel, list.ShardInfo)
		case found != (holds || !enabled):
			t.Errorf("listing with %s (enabled %v): %s/%s found %v", sel, enabled, namespace, name, found)
		}
	}
}
