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

package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
)

// FieldManager names this controller in managedFields of what it writes.
const FieldManager = "book-controller"

// apiWriter makes the sync's three kinds of API write, each for the Book
// it is made for. clientWriter makes them with the typed clients, as
// sample-controller does; the layers that watch our writes (own writes,
// the Observer) wrap it, so that the sync calls the same three methods
// whichever layers are on.
type apiWriter interface {
	createConfigMap(ctx context.Context, book *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error)
	updateConfigMap(ctx context.Context, book *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error)
	// updateStatus writes book's status through the status subresource.
	updateStatus(ctx context.Context, book *webappv2.Book) (*webappv2.Book, error)
}

// clientWriter writes with the typed clients.
type clientWriter struct {
	kube  kubernetes.Interface
	books versioned.Interface
}

func (w clientWriter) createConfigMap(ctx context.Context, _ *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return w.kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
}

func (w clientWriter) updateConfigMap(ctx context.Context, _ *webappv2.Book, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	return w.kube.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
}

func (w clientWriter) updateStatus(ctx context.Context, book *webappv2.Book) (*webappv2.Book, error) {
	return w.books.WebappV2().Books(book.Namespace).UpdateStatus(ctx, book, metav1.UpdateOptions{FieldManager: FieldManager})
}
