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
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestWebhookManifests pins the conversion webhook's permissions to the one
// Secret and the one CRD, and its Service and NetworkPolicy to the pods'
// webhook port.
func TestWebhookManifests(t *testing.T) {
	objs := env.RenderManifests(t, baseDir)
	var role rbacv1.Role
	toTyped(t, find(t, objs, "Role", controllerNamespace, "book-controller-webhook"), &role)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"book-controller-webhook-certs"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("webhook Role rules %+v, want %+v", role.Rules, want)
	}
	var cr rbacv1.ClusterRole
	toTyped(t, find(t, objs, "ClusterRole", "", "book-controller-webhook"), &cr)
	wantCR := []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
		ResourceNames: []string{"books.webapp.ydzs.io"}, Verbs: []string{"get", "list", "watch", "patch"}}}
	if !reflect.DeepEqual(cr.Rules, wantCR) {
		t.Errorf("webhook ClusterRole rules %+v, want %+v", cr.Rules, wantCR)
	}
	var rb rbacv1.RoleBinding
	toTyped(t, find(t, objs, "RoleBinding", controllerNamespace, "book-controller-webhook"), &rb)
	checkBinding(t, rb.RoleRef, rb.Subjects, "Role", "book-controller-webhook")
	var crb rbacv1.ClusterRoleBinding
	toTyped(t, find(t, objs, "ClusterRoleBinding", "", "book-controller-webhook"), &crb)
	checkBinding(t, crb.RoleRef, crb.Subjects, "ClusterRole", "book-controller-webhook")

	var svc corev1.Service
	toTyped(t, find(t, objs, "Service", controllerNamespace, "book-controller-webhook"), &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].TargetPort != intstr.FromString("webhook") {
		t.Errorf("webhook Service ports %+v, want 443 -> webhook", svc.Spec.Ports)
	}
	var np networkingv1.NetworkPolicy
	toTyped(t, find(t, objs, "NetworkPolicy", controllerNamespace, "book-controller-webhook"), &np)
	tcp := corev1.ProtocolTCP
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 0 ||
		!reflect.DeepEqual(np.Spec.Ingress[0].Ports, []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(9443))}}) {
		t.Errorf("webhook NetworkPolicy ingress %+v, want TCP 9443 from anywhere", np.Spec.Ingress)
	}
}

// webhookOnlyComponent runs the conversion webhook as a Deployment of its own.
const webhookOnlyComponent = "manifests/components/webhook-only"

// TestWebhookOnlyComponent renders manifests/ with the webhook-only
// component and dry-runs every object server-side. Its Deployment runs
// --webhook-only and no Lease; its pods are the webhook Service's and
// NetworkPolicy's, beside the controller's, and no other Deployment's; they
// run as the controller's ServiceAccount, whose roles cover the webhook.
func TestWebhookOnlyComponent(t *testing.T) {
	_, objs := renderWith(t, webhookOnlyComponent)
	dryRunApply(t, objs)
	var webhook, controller appsv1.Deployment
	toTyped(t, find(t, objs, "Deployment", controllerNamespace, "book-controller-webhook"), &webhook)
	toTyped(t, find(t, objs, "Deployment", controllerNamespace, "book-controller"), &controller)
	c := webhook.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--webhook-only") || slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect") }) {
		t.Errorf("webhook-only args %q: want --webhook-only, and no --leader-elect (it refuses one)", c.Args)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" && p.ContainerPort == 9443 }) {
		t.Errorf("webhook-only ports %+v: want webhook 9443, the Service's target", c.Ports)
	}
	if sa := webhook.Spec.Template.Spec.ServiceAccountName; sa != controller.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("webhook-only runs as %q, want the controller's ServiceAccount %q", sa, controller.Spec.Template.Spec.ServiceAccountName)
	}
	var svc corev1.Service
	toTyped(t, find(t, objs, "Service", controllerNamespace, "book-controller-webhook"), &svc)
	var np networkingv1.NetworkPolicy
	toTyped(t, find(t, objs, "NetworkPolicy", controllerNamespace, "book-controller-webhook"), &np)
	for _, d := range []appsv1.Deployment{webhook, controller} {
		pods := labels.Set(d.Spec.Template.Labels)
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(pods) || !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(pods) {
			t.Errorf("the webhook Service (%v) or NetworkPolicy (%v) does not select %s's pods %v", svc.Spec.Selector, np.Spec.PodSelector.MatchLabels, d.Name, pods)
		}
	}
	if selects(controller, webhook) || selects(webhook, controller) {
		t.Errorf("the Deployments' selectors overlap: %v and %v", controller.Spec.Selector.MatchLabels, webhook.Spec.Selector.MatchLabels)
	}
}

// selects reports whether d's selector matches other's pods: two
// Deployments that do would fight over them.
func selects(d, other appsv1.Deployment) bool {
	return labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(other.Spec.Template.Labels))
}
