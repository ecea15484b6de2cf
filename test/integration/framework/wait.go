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
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// Timeout bounds every wait on the cluster.
const Timeout = 60 * time.Second

// PollInterval is how often a wait on the cluster looks.
const PollInterval = 100 * time.Millisecond

// Eventually is poll.Eventually at the cluster's pace: it looks every
// PollInterval and fails the test after Timeout, naming what was awaited
// and the state check last reported.
func Eventually(t testing.TB, what string, check poll.Check) {
	t.Helper()
	poll.Eventually(t, what, PollInterval, Timeout, check)
}

// WaitForBook waits until the Book satisfies cond and returns it.
func (e *Env) WaitForBook(t testing.TB, ns, name, what string, cond func(*webappv2.Book) bool) *webappv2.Book {
	t.Helper()
	var book *webappv2.Book
	Eventually(t, "Book "+ns+"/"+name+" "+what, func(ctx context.Context) error {
		b, err := e.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		book = b
		return poll.Done(cond(b), "%s", DescribeBook(b))
	})
	return book
}

// DescribeBook is the part of a Book's state that waits report: its
// generation and its status.
func DescribeBook(b *webappv2.Book) string {
	c := meta.FindStatusCondition(b.Status.Conditions, "Ready")
	if c == nil {
		return fmt.Sprintf("generation %d, observedGeneration %d, no Ready condition", b.Generation, b.Status.ObservedGeneration)
	}
	return fmt.Sprintf("generation %d, observedGeneration %d, Ready=%s %s for generation %d: %s",
		b.Generation, b.Status.ObservedGeneration, c.Status, c.Reason, c.ObservedGeneration, c.Message)
}

// WaitForReady waits until the Book's Ready condition has the given status
// and reason for its current generation.
func (e *Env) WaitForReady(t testing.TB, ns, name string, status metav1.ConditionStatus, reason string) *webappv2.Book {
	t.Helper()
	return e.WaitForBook(t, ns, name, "Ready="+string(status)+" ("+reason+")", func(b *webappv2.Book) bool {
		return ReadyAs(b, status, reason)
	})
}

// WaitForConfigMap waits until the ConfigMap exists and satisfies cond.
func (e *Env) WaitForConfigMap(t testing.TB, ns, name, what string, cond func(*corev1.ConfigMap) bool) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	Eventually(t, "ConfigMap "+ns+"/"+name+" "+what, func(ctx context.Context) error {
		c, err := e.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm = c
		return poll.Done(cond(c), "%s", describeConfigMap(c))
	})
	return cm
}

func describeConfigMap(cm *corev1.ConfigMap) string {
	var owners []string
	for _, ref := range cm.OwnerReferences {
		owners = append(owners, fmt.Sprintf("%s %s (UID %s, controller %t)", ref.Kind, ref.Name, ref.UID, ref.Controller != nil && *ref.Controller))
	}
	return fmt.Sprintf("UID %s, data %q, labels %v, owners %v, deletionTimestamp %v", cm.UID, cm.Data, cm.Labels, owners, cm.DeletionTimestamp)
}

// WaitForConfigMapGone waits until the ConfigMap no longer exists.
func (e *Env) WaitForConfigMapGone(t testing.TB, ns, name string) {
	t.Helper()
	Eventually(t, "ConfigMap "+ns+"/"+name+" to be deleted", func(ctx context.Context) error {
		cm, err := e.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return errors.New("it exists: " + describeConfigMap(cm))
	})
}

// WaitForEvent waits for an events.k8s.io event about the named Book with
// the given type and reason.
func (e *Env) WaitForEvent(t testing.TB, ns, book, eventType, reason string) {
	t.Helper()
	Eventually(t, eventType+" event "+reason+" for Book "+ns+"/"+book, func(ctx context.Context) error {
		list, err := e.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Book" && ev.Regarding.Name == book {
				if ev.Type == eventType && ev.Reason == reason {
					return nil
				}
				seen = append(seen, ev.Type+" "+ev.Reason)
			}
		}
		return fmt.Errorf("events about the Book: %v", seen)
	})
}

// NewBook returns a Book with the given spec, ready to create.
func NewBook(ns, name, title string, price int32) *webappv2.Book {
	return &webappv2.Book{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       webappv2.BookSpec{Title: title, Price: webappv2.WholePrice(price)},
	}
}
