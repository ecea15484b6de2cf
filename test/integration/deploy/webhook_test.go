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
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
		ResourceNames: []string{"books.webapp.ydzs.io"}, Verbs: []string{"get", "patch"}}}
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
