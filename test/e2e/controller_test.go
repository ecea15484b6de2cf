//go:build e2e && linux

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

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/localcluster"
	"ydzs.io/book-controller/test/integration/framework"
)

// env is the cluster with a node that TestController starts.
var env *framework.Env

// TestController deploys the controller as the lesson does and runs the
// checks in order, on the same Deployment: later ones restart and delete
// its pods.
func TestController(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the node needs root (cgroups, network namespaces, mounts): run make test-e2e as root")
	}
	e, err := framework.SetupWith(framework.SetupOptions{Node: true})
	if err != nil {
		t.Fatalf("starting a cluster with a node: %v", err)
	}
	env = e
	dir := env.Cluster.Dir()
	before := residue(dir)
	t.Cleanup(func() {
		env.Teardown()
		checkClean(t, dir, before)
	})
	checkNetns(t, env.Cluster)
	// The lesson's commands, as it types them (one platform: the node's).
	run(t, "make", "image", "image-push", "IMG="+image, "IMAGE_PLATFORMS=linux/amd64")
	run(t, "make", "install")
	run(t, "make", "deploy", "IMG="+image)

	t.Run("pods Running and Ready through the kubelet's probes", testPodsReady)
	t.Run("container as uid 65532, read-only root, no capabilities, RuntimeDefault seccomp, read from /proc", testSecurity)
	t.Run("Books Ready, written by the Lease holder with its projected token", testBooksByLeader)
	t.Run("a write the RBAC does not grant is refused", testRBACRefuses)
	t.Run("metrics over HTTPS: 200 for metrics-reader, 403 for others", testMetrics)
	t.Run("kubectl logs", testLogs)
	t.Run("rollout restart hands the Lease over, no ConfigMap created twice", testRolloutRestart)
	t.Run("deleting the leader pod: exit 0 within grace, takeover within lease+TakeoverSlack", testDeleteLeader)
	t.Run("too small a memory limit: OOM-killed and restarted; converges once raised", testOOM)
	t.Run("conversion through the webhook's Service, then by the webhook-only pods alone", testConversionThroughTheService) // fork:line v2
}

func testPodsReady(t *testing.T) {
	pods := waitRolledOut(t, 2)
	for _, p := range pods {
		if p.Spec.NodeName != "127.0.0.1" || p.Status.PodIP == "" || p.Spec.HostNetwork {
			t.Errorf("pod %s: node %q, IP %q, hostNetwork %v; want node 127.0.0.1, an IP of its own", p.Name, p.Spec.NodeName, p.Status.PodIP, p.Spec.HostNetwork)
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || !cs[0].Ready || cs[0].Image != image && !strings.HasSuffix(cs[0].Image, image) {
			t.Errorf("pod %s: container statuses %+v; want one Ready container of %s", p.Name, cs, image)
		}
	}
	waitLeaderAmong(t, pods, 2*leaseDuration)
}

func testSecurity(t *testing.T) {
	for _, p := range waitRolledOut(t, 2) {
		pid := containerPid(t, &p)
		st := procStatus(t, pid)
		want := map[string]string{
			"Uid": "65532 65532 65532 65532", "Gid": "65532 65532 65532 65532",
			"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
			"NoNewPrivs": "1", // allowPrivilegeEscalation: false
			"Seccomp":    "2", // a filter: containerd's RuntimeDefault profile
		}
		for k, v := range want {
			if st[k] != v {
				t.Errorf("pod %s, pid %d: /proc status %s = %q, want %q", p.Name, pid, k, st[k], v)
			}
		}
		root, token := mountOptions(t, pid, "/"), mountOptions(t, pid, "/var/run/secrets/kubernetes.io/serviceaccount")
		if !hasOption(root, "ro") {
			t.Errorf("pod %s: root file system mounted %q, want ro", p.Name, root)
		}
		if token == "" {
			t.Errorf("pod %s: no service account token volume mounted", p.Name)
		}
		claims := tokenClaims(t, filepath.Join("/proc", strconv.Itoa(pid), "root/var/run/secrets/kubernetes.io/serviceaccount/token"))
		if claims.Kubernetes.Pod.Name != p.Name || claims.Kubernetes.ServiceAccount.Name != "book-controller" {
			t.Errorf("pod %s: its token is bound to pod %q, service account %q; want a projected token of this pod for book-controller",
				p.Name, claims.Kubernetes.Pod.Name, claims.Kubernetes.ServiceAccount.Name)
		}
	}
}

// mountOptions are the per-mount options of the mount at point in the
// process's mount namespace, "" if nothing is mounted there.
func mountOptions(t *testing.T, pid int, point string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	opts := ""
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == point {
			opts = f[5] // the last one mounted there is what the process sees
		}
	}
	return opts
}

func hasOption(opts, want string) bool {
	for _, o := range strings.Split(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// boundClaims are the claims of a projected (bound) service account token
// that name what it is bound to; a legacy Secret token has none of them.
type boundClaims struct {
	Kubernetes struct {
		Pod            struct{ Name string } `json:"pod"`
		ServiceAccount struct{ Name string } `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

func tokenClaims(t *testing.T, path string) boundClaims {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the pod's token: %v", err)
	}
	parts := strings.Split(strings.TrimSpace(string(raw)), ".")
	var c boundClaims
	if len(parts) != 3 {
		t.Fatalf("the pod's token is not a JWT (%d parts)", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err == nil {
		err = json.Unmarshal(payload, &c)
	}
	if err != nil {
		t.Fatalf("decoding the pod's token: %v", err)
	}
	return c
}

func testBooksByLeader(t *testing.T) {
	leader := waitLeaderAmong(t, waitRolledOut(t, 2), 2*leaseDuration)
	ns := env.Namespace(t)
	createBooks(t, ns, "book", 20)
	waitBooksReady(t, ns, 20, framework.Timeout)
	statusWrites := 0
	for _, e := range env.AuditLog(t) {
		ref := e.ObjectRef
		if ref == nil || ref.Namespace != ns || ref.Resource != "books" || ref.Subresource != "status" {
			continue
		}
		statusWrites++
		pod := e.User.Extra["authentication.kubernetes.io/pod-name"]
		if e.User.Username != saUser || len(pod) != 1 || pod[0] != leader.Name {
			t.Errorf("status write of %s by %q from pod %v; want %s from the Lease holder %s", ref.Name, e.User.Username, pod, saUser, leader.Name)
		}
	}
	if statusWrites < 20 {
		t.Errorf("%d status writes of the 20 Books in the audit log, want at least 20", statusWrites)
	}
	t.Logf("%d status writes, all by %s with the projected token of the Lease holder %s", statusWrites, saUser, leader.Name)
}

// controllerClient is a client with a fresh token of the controller's own
// service account, as its pods get one.
func controllerClient(t *testing.T) (kubernetes.Interface, versioned.Interface) {
	t.Helper()
	tr, err := env.Kube.CoreV1().ServiceAccounts(systemNS).CreateToken(context.Background(), "book-controller",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.RESTConfig()
	cfg.BearerToken = tr.Status.Token
	cfg.Impersonate = rest.ImpersonationConfig{}
	return kubernetes.NewForConfigOrDie(cfg), versioned.NewForConfigOrDie(cfg)
}

func testRBACRefuses(t *testing.T) {
	ns := env.Namespace(t)
	createBooks(t, ns, "rbac", 1)
	waitBooksReady(t, ns, 1, framework.Timeout)
	name := framework.BookName("rbac", 0)
	kube, books := controllerClient(t)
	ctx := context.Background()
	err := kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("deleting a ConfigMap as %s: %v, want Forbidden (the ClusterRole grants no delete)", saUser, err)
	}
	b, err := books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.Price = webappv2.WholePrice(b.Spec.Price.WholeUnits() + 1)
	if _, err := books.WebappV2().Books(ns).Update(ctx, b, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("updating a Book's spec as %s: %v, want Forbidden (only books/status)", saUser, err)
	}
	if _, err := kube.CoreV1().Secrets(systemNS).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing Secrets as %s: %v, want Forbidden", saUser, err)
	}
}

func testMetrics(t *testing.T) {
	ns := env.Namespace(t)
	reader := env.ServiceAccountToken(t, ns, "metrics-reader")
	env.BindClusterRole(t, "book-controller-metrics-reader", ns, "metrics-reader", "get", "/metrics")
	other := env.ServiceAccountToken(t, ns, "not-a-reader")
	for _, p := range waitRolledOut(t, 2) {
		addr := p.Status.PodIP + ":8443"
		poll.Eventually(t, "the metrics of "+p.Name+" to answer the reader", 200*time.Millisecond, framework.Timeout, func(context.Context) error {
			if code, _, err := podGet(addr, "/metrics", reader); err != nil || code != 200 {
				return fmt.Errorf("code %d: %v", code, err)
			}
			return nil
		})
		code, body, err := podGet(addr, "/metrics", reader)
		if err != nil || code != 200 || !strings.Contains(body, "# TYPE") {
			t.Errorf("pod %s: GET /metrics as a metrics-reader: %d %v, want 200 and metrics", p.Name, code, err)
		}
		if code, _, err := podGet(addr, "/metrics", other); err != nil || code != 403 {
			t.Errorf("pod %s: GET /metrics as a service account without metrics-reader: %d %v, want 403", p.Name, code, err)
		}
		if code, _, err := podGet(addr, "/metrics", ""); err != nil || code != 401 {
			t.Errorf("pod %s: GET /metrics without a token: %d %v, want 401", p.Name, code, err)
		}
	}
}

// podGet is a GET over HTTPS to a pod's address, dialed from inside the
// node's network namespace (the pods' bridge is there, not on the host).
// The certificate is the pod's self-signed one, so it is not verified; the
// token is what is under test.
func podGet(addr, path, token string) (int, string, error) {
	return framework.HTTPSGetVia(localcluster.DialNode, addr, path, token, nil)
}

func testLogs(t *testing.T) {
	leader := waitLeaderAmong(t, waitRolledOut(t, 2), 2*leaseDuration)
	out := kubectl(t, "logs", "-n", systemNS, leader.Name)
	if !strings.Contains(out, "Became the leader") {
		t.Errorf("kubectl logs %s has no \"Became the leader\" line:\n%s", leader.Name, tail(out, 20))
	}
}
