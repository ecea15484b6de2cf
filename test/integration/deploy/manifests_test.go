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

package deploy_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/test/integration/framework"
)

const (
	baseDir       = framework.ManifestsDir
	namespacedDir = "manifests/overlays/namespaced"
	shardedDir    = "manifests/overlays/sharded" // fork:line shards

	controllerNamespace = "book-controller-system"
	controllerName      = "book-controller"
	leaderElectionRole  = "book-controller-leader-election"
	metricsAuthRole     = "book-controller-metrics-auth"
	metricsReaderRole   = "book-controller-metrics-reader"
	metricsServiceName  = "book-controller-metrics"
	// fork:begin v2
	// storageMigrationRole is --storage-migration's (pkg/migration).
	storageMigrationRole = "book-controller-storage-migration"
	// fork:end v2
	// metricsPort serves /metrics: HTTPS with --metrics-secure in manifests/,
	// plain HTTP in the namespaced overlay.
	metricsPort = 8443
	// nonRootUID is the distroless nonroot user, the Dockerfile's USER.
	nonRootUID = 65532
)

// wantClusterRules is the controller's whole cluster-wide permission, as
// "group resource verb". Adding a verb to manifests/rbac/cluster_role.yaml
// must come with the code that needs it and a change here.
var wantClusterRules = []string{
	"webapp.ydzs.io books get",
	"webapp.ydzs.io books list",
	"webapp.ydzs.io books watch",
	"webapp.ydzs.io books/status update",
	" configmaps get",
	" configmaps list",
	" configmaps watch",
	" configmaps create",
	" configmaps update",
	"events.k8s.io events create",
	"events.k8s.io events patch",
}

// wantMetricsAuthRules is what --metrics-secure asks of the API server:
// k8s.io/apiserver's delegating authenticator and authorizer create reviews.
var wantMetricsAuthRules = []string{
	"authentication.k8s.io tokenreviews create",
	"authorization.k8s.io subjectaccessreviews create",
}

// wantLeaderElectionRules is what client-go's LeaseLock does, in the
// controller's own namespace only, and the list --shards makes to see the
// shard counts of the shard Leases' holders (pkg/shard/count.go).
var wantLeaderElectionRules = []string{
	"coordination.k8s.io leases get",
	"coordination.k8s.io leases list",
	"coordination.k8s.io leases create",
	"coordination.k8s.io leases update",
}

// TestBaseInventory pins what `kubectl apply -k manifests/` creates.
func TestBaseInventory(t *testing.T) {
	objs := env.RenderManifests(t, baseDir)
	want := []string{
		"Namespace book-controller-system",
		"CustomResourceDefinition books.webapp.ydzs.io",
		"ServiceAccount book-controller-system/book-controller",
		"ClusterRole book-controller",
		"ClusterRoleBinding book-controller",
		"Role book-controller-system/book-controller-leader-election",
		"RoleBinding book-controller-system/book-controller-leader-election",
		"Deployment book-controller-system/book-controller",
		"Service book-controller-system/book-controller-metrics",
		"ClusterRole " + metricsAuthRole,
		"ClusterRoleBinding " + metricsAuthRole,
		"ClusterRole " + metricsReaderRole,
		"NetworkPolicy book-controller-system/book-controller-metrics",
		// fork:begin v2
		"Role book-controller-system/book-controller-webhook",
		"RoleBinding book-controller-system/book-controller-webhook",
		"ClusterRole book-controller-webhook",
		"ClusterRoleBinding book-controller-webhook",
		"Service book-controller-system/book-controller-webhook",
		"NetworkPolicy book-controller-system/book-controller-webhook",
		"ClusterRole " + storageMigrationRole,
		"ClusterRoleBinding " + storageMigrationRole,
		// fork:end v2
	}
	assertInventory(t, objs, want)

	crd, err := framework.LoadCRD()
	if err != nil {
		t.Fatal(err)
	}
	if got := find(t, objs, "CustomResourceDefinition", "", crd.Name); got.GetName() != crd.Name {
		t.Errorf("CRD %s, want the one in manifests/crd.yaml (%s)", got.GetName(), crd.Name)
	}
}

func TestNamespacedInventory(t *testing.T) {
	objs := env.RenderManifests(t, namespacedDir)
	watch := watchedNamespace(t, objs)
	want := []string{
		"Namespace book-controller-system",
		"Namespace " + watch,
		"ServiceAccount book-controller-system/book-controller",
		"Role book-controller-system/book-controller-leader-election",
		"RoleBinding book-controller-system/book-controller-leader-election",
		"Role " + watch + "/book-controller",
		"RoleBinding " + watch + "/book-controller",
		"Deployment book-controller-system/book-controller",
		"Service book-controller-system/book-controller-metrics",
		"NetworkPolicy book-controller-system/book-controller-metrics",
		// fork:begin v2
		"Role book-controller-system/book-controller-webhook",
		"RoleBinding book-controller-system/book-controller-webhook",
		"Service book-controller-system/book-controller-webhook",
		"NetworkPolicy book-controller-system/book-controller-webhook",
		// fork:end v2
	}
	// No ClusterRole, no ClusterRoleBinding (so no TokenReviews for metrics
	// callers either), and no CRD: a cluster admin installs that once (the
	// overlay's header says so).
	assertInventory(t, objs, want)
}

// overlays are the kustomizations users apply.
var overlays = []string{
	baseDir,
	namespacedDir,
	shardedDir, // fork:line shards
}

// TestManifestsAcceptedByAPIServer sends every rendered object to the API
// server as a server-side apply with dryRun=All and strict field
// validation: schema, defaulting, validation and admission (Pod Security
// included, whose warnings count as failures) run, nothing is stored. The
// namespaces are created for real first, as they would be by apply -k.
func TestManifestsAcceptedByAPIServer(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			dryRunApply(t, env.RenderManifests(t, dir))
		})
	}
}

// TestKubectlApplyServerDryRun runs the commands users run, with the
// kubectl matching the cluster, against the test cluster, server-side dry
// run: apply -k of both kustomizations, and apply -f of the CRD and the
// examples, which the kustomization in manifests/ must not disturb.
func TestKubectlApplyServerDryRun(t *testing.T) {
	// Namespaces must exist for the namespaced objects' dry run.
	for _, dir := range overlays {
		var namespaces []*unstructured.Unstructured
		for _, obj := range env.RenderManifests(t, dir) {
			if obj.GetKind() == "Namespace" {
				namespaces = append(namespaces, obj)
			}
		}
		env.ApplyIdentityObjects(t, namespaces)
	}
	root := framework.RepoRoot()
	for _, args := range [][]string{
		{"apply", "-k", filepath.Join(root, baseDir)},
		{"apply", "-k", filepath.Join(root, namespacedDir)},
		{"apply", "-k", filepath.Join(root, shardedDir)}, // fork:line shards
		{"apply", "-f", filepath.Join(root, "manifests", "crd.yaml")},
		{"apply", "-f", filepath.Join(root, "manifests", "examples") + "/"},
		{"apply", "-f", filepath.Join(root, "manifests", "examples", "v2") + "/"}, // fork:line v2
	} {
		t.Run(strings.Join(args[:2], " ")+" "+filepath.Base(args[2]), func(t *testing.T) {
			args = append(args, "--dry-run=server", "--kubeconfig", env.Cluster.KubeconfigPath())
			out, err := exec.Command(filepath.Join(env.Cluster.BinDir(), "kubectl"), args...).CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if !strings.Contains(line, "Warning") || strings.Contains(line, "last-applied-configuration") {
					continue
				}
				// fork:begin v2
				// manifests/examples are v1 Books, which the API server
				// says are deprecated.
				if strings.Contains(line, "webapp.ydzs.io/v1 Book is deprecated") {
					continue
				}
				// fork:end v2
				t.Errorf("kubectl %s warned:\n%s", strings.Join(args, " "), out)
				break
			}
		})
	}
}

// fork:begin shards
// TestShardedOverlay: the base's objects, with a Deployment of 4 replicas
// (3 shard holders and a spare) that run --shards=3 over every namespace
// with leader election, hardened like the base's.
func TestShardedOverlay(t *testing.T) {
	objs := env.RenderManifests(t, shardedDir)
	var d appsv1.Deployment
	toTyped(t, find(t, objs, "Deployment", controllerNamespace, controllerName), &d)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 4 {
		t.Errorf("replicas = %v, want 4 (three shard holders and a spare)", ptr.Deref(d.Spec.Replicas, 1))
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--shards=3", "--leader-elect", "--metrics-secure"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--namespace") {
			t.Errorf("args %q limit the watch to one namespace: shards need every namespace", args)
		}
	}
	// Sharded replicas read Books in every namespace: the ClusterRole.
	find(t, objs, "ClusterRole", "", controllerName)
}

// fork:end shards

func TestDeploymentHardened(t *testing.T) {
	for _, c := range []struct {
		dir string
		// The namespaced overlay cannot check metrics callers (no
		// cluster-wide TokenReviews), so it serves plain HTTP.
		metricsSecureArg string
	}{
		{baseDir, "--metrics-secure"},
		{namespacedDir, "--metrics-secure=false"},
	} {
		t.Run(c.dir, func(t *testing.T) {
			objs := env.RenderManifests(t, c.dir)
			var d appsv1.Deployment
			toTyped(t, find(t, objs, "Deployment", controllerNamespace, controllerName), &d)
			checkDeployment(t, &d, objs)
			args := d.Spec.Template.Spec.Containers[0].Args
			if !slices.Contains(args, c.metricsSecureArg) {
				t.Errorf("args %q lack %q", args, c.metricsSecureArg)
			}

			var svc corev1.Service
			toTyped(t, find(t, objs, "Service", controllerNamespace, metricsServiceName), &svc)
			checkMetricsService(t, &svc, &d)
		})
	}
}

func checkDeployment(t *testing.T, d *appsv1.Deployment, objs []*unstructured.Unstructured) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2 (a leader and a standby)", ptr.Deref(d.Spec.Replicas, 1))
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || selector.Empty() {
		t.Errorf("selector %v: %v", d.Spec.Selector, err)
	}
	pod := d.Spec.Template.Spec
	saNamespace, saName := framework.ServiceAccountOf(t, objs)
	if pod.ServiceAccountName != saName || saNamespace != d.Namespace {
		t.Errorf("serviceAccountName = %q (Deployment in %s), want %s/%s", pod.ServiceAccountName, d.Namespace, saNamespace, saName)
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken = false: the controller needs its token")
	}
	psc := pod.SecurityContext
	if psc == nil {
		t.Fatal("pod securityContext missing")
	}
	if !ptr.Deref(psc.RunAsNonRoot, false) {
		t.Errorf("pod runAsNonRoot = %v, want true", psc.RunAsNonRoot)
	}
	if ptr.Deref(psc.RunAsUser, 0) != nonRootUID || ptr.Deref(psc.RunAsGroup, 0) != nonRootUID {
		t.Errorf("pod runAsUser/runAsGroup = %v/%v, want %d (distroless nonroot, the Dockerfile's USER)", psc.RunAsUser, psc.RunAsGroup, nonRootUID)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccompProfile = %v, want RuntimeDefault", psc.SeccompProfile)
	}
	if len(pod.Containers) != 1 || len(pod.InitContainers) != 0 {
		t.Fatalf("%d containers and %d init containers, want 1 and 0", len(pod.Containers), len(pod.InitContainers))
	}
	c := pod.Containers[0]
	if c.Image != "book-controller:latest" {
		t.Errorf("image = %q, want book-controller:latest (kustomize images: and make deploy IMG= replace it)", c.Image)
	}
	if len(c.Command) != 0 {
		t.Errorf("command = %q, want none: the image's ENTRYPOINT is /book-controller", c.Command)
	}
	for _, arg := range []string{
		"--leader-elect",
		"--leader-elect-namespace=$(POD_NAMESPACE)",
		"--metrics-bind-address=:8443",
		"--health-probe-bind-address=:8081",
	} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %q", c.Args, arg)
		}
	}
	if e := envVar(c, "POD_NAMESPACE"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("env POD_NAMESPACE = %+v, want the downward API's metadata.namespace", e)
	}

	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container securityContext missing")
	}
	if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
		t.Errorf("readOnlyRootFilesystem = %v, want true", sc.ReadOnlyRootFilesystem)
	}
	if ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		t.Errorf("allowPrivilegeEscalation = %v, want false", sc.AllowPrivilegeEscalation)
	}
	if ptr.Deref(sc.Privileged, false) {
		t.Errorf("privileged = true")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and nothing added", sc.Capabilities)
	}

	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[name]
		lim, hasLim := c.Resources.Limits[name]
		if !hasReq || !hasLim {
			t.Errorf("%s: request %v, limit %v; want both set", name, req.String(), lim.String())
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("%s request %s above its limit %s", name, req.String(), lim.String())
		}
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != metricsPort || ports["health"] != 8081 {
		t.Errorf("container ports = %v, want metrics %d and health 8081", ports, metricsPort)
	}
	checkProbe(t, "liveness", c.LivenessProbe, "/healthz", ports)
	checkProbe(t, "readiness", c.ReadinessProbe, "/readyz", ports)
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, path string, ports map[string]int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s probe = %+v, want an HTTP GET of %s", what, p, path)
		return
	}
	port := p.HTTPGet.Port.IntVal
	if p.HTTPGet.Port.Type == intstr.String {
		port = ports[p.HTTPGet.Port.StrVal]
	}
	if p.HTTPGet.Path != path || port != 8081 {
		t.Errorf("%s probe = GET %s on port %v (%d), want GET %s on 8081", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), port, path)
	}
}

func checkMetricsService(t *testing.T, svc *corev1.Service, d *appsv1.Deployment) {
	t.Helper()
	if len(svc.Spec.Selector) == 0 {
		t.Fatal("metrics Service has no selector")
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selects %s=%s, which the controller's pods lack (%v)", k, v, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("metrics Service ports = %+v, want one", svc.Spec.Ports)
	}
	p := svc.Spec.Ports[0]
	target := p.TargetPort.IntVal
	if p.TargetPort.Type == intstr.String {
		for _, cp := range d.Spec.Template.Spec.Containers[0].Ports {
			if cp.Name == p.TargetPort.StrVal {
				target = cp.ContainerPort
			}
		}
	}
	if p.Port != metricsPort || target != metricsPort || p.Name != "metrics" {
		t.Errorf("metrics Service port = %+v (target %d), want metrics %d -> %d", p, target, metricsPort, metricsPort)
	}
}

// TestNamespacedOverlayWatchesOneNamespace: the flag, the Role and the
// namespace that is created all name the same namespace, and the Role
// grants there exactly what the ClusterRole grants everywhere.
func TestNamespacedOverlayWatchesOneNamespace(t *testing.T) {
	objs := env.RenderManifests(t, namespacedDir)
	watch := watchedNamespace(t, objs)
	if watch == controllerNamespace || watch == "" {
		t.Fatalf("watched namespace %q", watch)
	}
	var d appsv1.Deployment
	toTyped(t, find(t, objs, "Deployment", controllerNamespace, controllerName), &d)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--namespace=$(WATCH_NAMESPACE)") {
		t.Errorf("args %q lack --namespace=$(WATCH_NAMESPACE)", d.Spec.Template.Spec.Containers[0].Args)
	}
	find(t, objs, "Namespace", "", watch)

	var role rbacv1.Role
	toTyped(t, find(t, objs, "Role", watch, controllerName), &role)
	assertRules(t, "Role "+watch+"/book-controller", role.Rules, wantClusterRules)

	var rb rbacv1.RoleBinding
	toTyped(t, find(t, objs, "RoleBinding", watch, controllerName), &rb)
	checkBinding(t, rb.RoleRef, rb.Subjects, "Role", controllerName)

	var leRole rbacv1.Role
	toTyped(t, find(t, objs, "Role", controllerNamespace, leaderElectionRole), &leRole)
	assertRules(t, "leader election Role", leRole.Rules, wantLeaderElectionRules)
}

// TestClusterRoleRules pins the ClusterRole, the leader election Role and
// their bindings to exactly the rules the code uses.
func TestClusterRoleRules(t *testing.T) {
	objs := env.RenderManifests(t, baseDir)

	var cr rbacv1.ClusterRole
	toTyped(t, find(t, objs, "ClusterRole", "", controllerName), &cr)
	if cr.AggregationRule != nil {
		t.Errorf("ClusterRole has an aggregationRule: %+v", cr.AggregationRule)
	}
	assertRules(t, "ClusterRole", cr.Rules, wantClusterRules)
	for _, r := range cr.Rules {
		if slices.Contains(r.Resources, "leases") {
			t.Errorf("ClusterRole grants leases in every namespace: %+v", r)
		}
	}
	var crb rbacv1.ClusterRoleBinding
	toTyped(t, find(t, objs, "ClusterRoleBinding", "", controllerName), &crb)
	checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", controllerName)

	var role rbacv1.Role
	toTyped(t, find(t, objs, "Role", controllerNamespace, leaderElectionRole), &role)
	assertRules(t, "leader election Role", role.Rules, wantLeaderElectionRules)
	var rb rbacv1.RoleBinding
	toTyped(t, find(t, objs, "RoleBinding", controllerNamespace, leaderElectionRole), &rb)
	checkBinding(t, rb.RoleRef, rb.Subjects, "Role", leaderElectionRole)

	var auth rbacv1.ClusterRole
	toTyped(t, find(t, objs, "ClusterRole", "", metricsAuthRole), &auth)
	assertRules(t, "metrics auth ClusterRole", auth.Rules, wantMetricsAuthRules)
	var authBinding rbacv1.ClusterRoleBinding
	toTyped(t, find(t, objs, "ClusterRoleBinding", "", metricsAuthRole), &authBinding)
	checkBinding(t, authBinding.RoleRef, authBinding.Subjects, "ClusterRole", metricsAuthRole)

	// fork:begin v2
	// The storage migration's CRD rules name the Book CRD alone.
	var sm rbacv1.ClusterRole
	toTyped(t, find(t, objs, "ClusterRole", "", storageMigrationRole), &sm)
	wantSM := []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			ResourceNames: []string{"books.webapp.ydzs.io"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"},
			ResourceNames: []string{"books.webapp.ydzs.io"}, Verbs: []string{"update"}},
		{APIGroups: []string{"storagemigration.k8s.io"}, Resources: []string{"storageversionmigrations"},
			Verbs: []string{"create", "get", "list", "watch", "delete"}},
	}
	if !reflect.DeepEqual(sm.Rules, wantSM) {
		t.Errorf("storage migration rules = %+v, want %+v", sm.Rules, wantSM)
	}
	var smBinding rbacv1.ClusterRoleBinding
	toTyped(t, find(t, objs, "ClusterRoleBinding", "", storageMigrationRole), &smBinding)
	checkBinding(t, smBinding.RoleRef, smBinding.Subjects, "ClusterRole", storageMigrationRole)
	// fork:end v2

	// metrics-reader is for scrapers: GET /metrics and nothing else, bound
	// to no one by manifests/ (manifests/components/prometheus binds it).
	var reader rbacv1.ClusterRole
	toTyped(t, find(t, objs, "ClusterRole", "", metricsReaderRole), &reader)
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if !reflect.DeepEqual(reader.Rules, want) {
		t.Errorf("metrics-reader rules = %+v, want only get /metrics", reader.Rules)
	}
	for _, obj := range objs {
		if ref, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name"); ref == metricsReaderRole {
			t.Errorf("%s %s binds %s in manifests/: the scraper's binding is the user's (or the prometheus component's)", obj.GetKind(), obj.GetName(), metricsReaderRole)
		}
	}
}

// TestNetworkPolicy: in both kustomizations, the controller's pods accept
// connections only on the metrics port and only from namespaces labelled
// metrics=enabled; egress is left alone (the API server must stay
// reachable). The API server accepting it is TestManifestsAcceptedByAPIServer.
func TestNetworkPolicy(t *testing.T) {
	for _, dir := range []string{baseDir, namespacedDir} {
		t.Run(dir, func(t *testing.T) {
			objs := env.RenderManifests(t, dir)
			var d appsv1.Deployment
			toTyped(t, find(t, objs, "Deployment", controllerNamespace, controllerName), &d)
			var np networkingv1.NetworkPolicy
			toTyped(t, find(t, objs, "NetworkPolicy", controllerNamespace, metricsServiceName), &np)

			selector, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil || selector.Empty() || !selector.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("podSelector %v does not select the controller's pods %v", np.Spec.PodSelector, d.Spec.Template.Labels)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
				t.Errorf("policyTypes = %v, want [Ingress] only", np.Spec.PolicyTypes)
			}
			if len(np.Spec.Ingress) != 1 {
				t.Fatalf("%d ingress rules, want 1", len(np.Spec.Ingress))
			}
			rule := np.Spec.Ingress[0]
			wantPeer := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"metrics": "enabled"}}}}
			if !reflect.DeepEqual(rule.From, wantPeer) {
				t.Errorf("ingress from %+v, want only namespaces labelled metrics=enabled", rule.From)
			}
			tcp := corev1.ProtocolTCP
			wantPorts := []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(metricsPort))}}
			if !reflect.DeepEqual(rule.Ports, wantPorts) {
				t.Errorf("ingress ports %+v, want TCP %d only", rule.Ports, metricsPort)
			}
		})
	}
}

func checkBinding(t *testing.T, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name string) {
	t.Helper()
	if ref.APIGroup != rbacv1.GroupName || ref.Kind != kind || ref.Name != name {
		t.Errorf("roleRef = %+v, want %s %s", ref, kind, name)
	}
	want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: controllerName, Namespace: controllerNamespace}}
	if !slices.Equal(subjects, want) {
		t.Errorf("subjects = %+v, want only the controller's ServiceAccount %s/%s", subjects, controllerNamespace, controllerName)
	}
}

// assertRules compares rules as a set of "group resource verb", and rejects
// wildcards, resourceNames and nonResourceURLs, which the set cannot show.
func assertRules(t *testing.T, what string, rules []rbacv1.PolicyRule, want []string) {
	t.Helper()
	var got []string
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: rule %+v has resourceNames or nonResourceURLs", what, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("%s: wildcard in rule %+v", what, r)
					}
					got = append(got, g+" "+res+" "+v)
				}
			}
		}
	}
	slices.Sort(got)
	w := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, w) {
		t.Errorf("%s rules (group resource verb):\n  got  %q\n  want %q", what, got, w)
	}
}

// dryRunApply server-side applies objs with dryRun=All, after applying
// their Namespaces for real.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var namespaces []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			namespaces = append(namespaces, obj)
		}
	}
	env.ApplyIdentityObjects(t, namespaces)

	warnings := &warningRecorder{}
	cfg := env.RESTConfig()
	cfg.WarningHandler = warnings
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	client := dynamic.NewForConfigOrDie(cfg)
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		t.Run(gvk.Kind+"/"+obj.GetName(), func(t *testing.T) {
			mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("the API server does not serve %s: %v", gvk, err)
			}
			var ri dynamic.ResourceInterface = client.Resource(mapping.Resource)
			if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
				// Without one, apply -k would use the kubeconfig's namespace.
				if obj.GetNamespace() == "" {
					t.Fatalf("namespaced %s %s names no namespace", gvk.Kind, obj.GetName())
				}
				ri = client.Resource(mapping.Resource).Namespace(obj.GetNamespace())
			} else if obj.GetNamespace() != "" {
				t.Errorf("cluster-scoped %s %s has namespace %q", gvk.Kind, obj.GetName(), obj.GetNamespace())
			}
			data, err := obj.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			warnings.take()
			_, err = ri.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
				DryRun:          []string{metav1.DryRunAll},
				FieldManager:    framework.ApplyFieldManager,
				Force:           ptr.To(true),
				FieldValidation: metav1.FieldValidationStrict,
			})
			if err != nil {
				t.Fatalf("server-side dry run of %s %s: %v", gvk.Kind, obj.GetName(), err)
			}
			if w := warnings.take(); len(w) > 0 {
				t.Errorf("the API server warned about %s %s:\n  %s", gvk.Kind, obj.GetName(), strings.Join(w, "\n  "))
			}
		})
	}
}

// warningRecorder collects the API server's warnings (Pod Security, deprecations).
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := w.msgs
	w.msgs = nil
	return msgs
}

// watchedNamespace is the namespace the namespaced overlay's controller
// watches: its WATCH_NAMESPACE, which must be the namespace of its Role.
func watchedNamespace(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var d appsv1.Deployment
	toTyped(t, find(t, objs, "Deployment", controllerNamespace, controllerName), &d)
	e := envVar(d.Spec.Template.Spec.Containers[0], "WATCH_NAMESPACE")
	if e == nil || e.Value == "" || e.ValueFrom != nil {
		t.Fatalf("WATCH_NAMESPACE = %+v, want a literal namespace", e)
	}
	var roleNamespaces []string
	for _, obj := range objs {
		if obj.GetKind() == "Role" && obj.GetName() == controllerName {
			roleNamespaces = append(roleNamespaces, obj.GetNamespace())
		}
	}
	if !slices.Equal(roleNamespaces, []string{e.Value}) {
		t.Fatalf("WATCH_NAMESPACE %q, but Role book-controller is in %q", e.Value, roleNamespaces)
	}
	return e.Value
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func assertInventory(t *testing.T, objs []*unstructured.Unstructured, want []string) {
	t.Helper()
	var got []string
	for _, obj := range objs {
		id := obj.GetKind() + " " + obj.GetName()
		if ns := obj.GetNamespace(); ns != "" {
			id = obj.GetKind() + " " + ns + "/" + obj.GetName()
		}
		got = append(got, id)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("rendered objects:\n  got  %q\n  want %q", got, want)
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == kind && obj.GetNamespace() == namespace && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("no %s %s/%s in the rendered manifests", kind, namespace, name)
	return nil
}

func toTyped(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}
