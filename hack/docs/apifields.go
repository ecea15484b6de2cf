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

package docs

import (
	"reflect"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiKinds are the Kubernetes objects the controller, its manifests and its
// tests deal in. Their fields' JSON names (managedFields, timeoutSeconds,
// imagePullPolicy…) are names a comment or a doc may cite as they are.
var apiKinds = []any{
	corev1.Pod{}, corev1.ConfigMap{}, corev1.Namespace{}, corev1.Service{}, corev1.Secret{},
	corev1.ServiceAccount{}, corev1.ResourceQuota{}, appsv1.Deployment{}, eventsv1.Event{},
	coordinationv1.Lease{}, rbacv1.ClusterRole{}, rbacv1.ClusterRoleBinding{}, networkingv1.NetworkPolicy{},
	admissionregistrationv1.ValidatingWebhookConfiguration{}, admissionregistrationv1.ValidatingAdmissionPolicy{},
	apiextensionsv1.CustomResourceDefinition{}, metav1.Status{}, metav1.ListOptions{},
}

// indexAPIFields adds the JSON field names of apiKinds, and of every struct
// they hold, to the root module's names.
func (r *Repo) indexAPIFields() {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				r.addIdent("", name)
			}
			walk(f.Type)
		}
	}
	for _, k := range apiKinds {
		walk(reflect.TypeOf(k))
	}
}
