package framework

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// Timeout bounds every wait on the cluster.
const Timeout = 60 * time.Second

// Eventually polls cond until it returns true or Timeout passes, then fails
// the test with what.
func Eventually(t testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, Timeout, true, cond)
	if err != nil {
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}

// WaitForBook waits until the Book satisfies cond and returns it.
func (e *Env) WaitForBook(t testing.TB, ns, name, what string, cond func(*webappv1.Book) bool) *webappv1.Book {
	t.Helper()
	var book *webappv1.Book
	Eventually(t, "Book "+ns+"/"+name+" "+what, func(ctx context.Context) (bool, error) {
		b, err := e.Books.WebappV1().Books(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		book = b
		return cond(b), nil
	})
	return book
}

// WaitForReady waits until the Book's Ready condition has the given status
// and reason for its current generation.
func (e *Env) WaitForReady(t testing.TB, ns, name string, status metav1.ConditionStatus, reason string) *webappv1.Book {
	t.Helper()
	return e.WaitForBook(t, ns, name, "Ready="+string(status)+" ("+reason+")", func(b *webappv1.Book) bool {
		c := meta.FindStatusCondition(b.Status.Conditions, "Ready")
		return c != nil && c.Status == status && c.Reason == reason &&
			c.ObservedGeneration == b.Generation && b.Status.ObservedGeneration == b.Generation
	})
}

// WaitForConfigMap waits until the ConfigMap exists and satisfies cond.
func (e *Env) WaitForConfigMap(t testing.TB, ns, name, what string, cond func(*corev1.ConfigMap) bool) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	Eventually(t, "ConfigMap "+ns+"/"+name+" "+what, func(ctx context.Context) (bool, error) {
		c, err := e.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		cm = c
		return cond(c), nil
	})
	return cm
}

// WaitForConfigMapGone waits until the ConfigMap no longer exists.
func (e *Env) WaitForConfigMapGone(t testing.TB, ns, name string) {
	t.Helper()
	Eventually(t, "ConfigMap "+ns+"/"+name+" to be deleted", func(ctx context.Context) (bool, error) {
		_, err := e.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// WaitForEvent waits for an events.k8s.io event about the named Book with
// the given type and reason.
func (e *Env) WaitForEvent(t testing.TB, ns, book, eventType, reason string) {
	t.Helper()
	Eventually(t, eventType+" event "+reason+" for Book "+ns+"/"+book, func(ctx context.Context) (bool, error) {
		list, err := e.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Book" && ev.Regarding.Name == book && ev.Type == eventType && ev.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
}

// NewBook returns a Book with the given spec, ready to create.
func NewBook(ns, name, title string, price int32) *webappv1.Book {
	return &webappv1.Book{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       webappv1.BookSpec{Title: title, Price: price},
	}
}
