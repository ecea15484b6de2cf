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
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
)

// Every check of a Book's readiness, in every suite (integration, chaos,
// e2e, parity, the bench, the live view's test), goes through IsReady or
// ReadyAs: a Ready condition written for an earlier generation says nothing
// about the spec the Book holds now.

// IsReady reports whether the Book is Ready for its current generation:
// status.observedGeneration is its generation, and its Ready condition is
// True and was written for that generation.
func IsReady(b *webappv2.Book) bool { return ReadyAs(b, metav1.ConditionTrue, "") }

// ReadyAs reports whether the Book's Ready condition has status, and
// reason unless reason is "", for the Book's current generation, with
// status.observedGeneration at that generation too.
func ReadyAs(b *webappv2.Book, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(b.Status.Conditions, controller.ConditionReady)
	return c != nil && c.Status == status && (reason == "" || c.Reason == reason) &&
		c.ObservedGeneration == b.Generation && b.Status.ObservedGeneration == b.Generation
}

// NotReady lists the Books in ns that are not Ready for their generation
// (IsReady), sorted, and says how many Books there are. A failed List is
// returned as the error it is, never as "none not Ready".
func (e *Env) NotReady(ctx context.Context, ns string) (bad []string, total int, err error) {
	list, err := e.Books.WebappV2().Books(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("listing the Books in %s: %w", ns, err)
	}
	bad, total = notReady(list.Items)
	return bad, total, nil
}

// notReady is NotReady of a list already read.
func notReady(books []webappv2.Book) (bad []string, total int) {
	for i := range books {
		if !IsReady(&books[i]) {
			bad = append(bad, books[i].Name)
		}
	}
	slices.Sort(bad)
	return bad, len(books)
}

// BooksReady is a check that ns holds exactly n Books and every one is
// Ready for its generation. It lists the namespace instead of getting each
// Book: there may be thousands.
func (e *Env) BooksReady(ns string, n int) poll.Check {
	return booksReady(ns, n, e.NotReady)
}

// booksReady is BooksReady with notReady listing the Books.
func booksReady(ns string, n int, notReady func(context.Context, string) ([]string, int, error)) poll.Check {
	return func(ctx context.Context) error {
		bad, total, err := notReady(ctx, ns)
		if err != nil {
			return err
		}
		return poll.Done(total == n && len(bad) == 0, "%s: %d Books (want %d), %d not Ready for their generation: %v",
			ns, total, n, len(bad), bad[:min(len(bad), 10)])
	}
}

// WaitForBooksReady waits until ns holds exactly n Books, all Ready for
// their generation.
func (e *Env) WaitForBooksReady(t testing.TB, ns string, n int) {
	t.Helper()
	Eventually(t, fmt.Sprintf("%d Books in %s Ready", n, ns), e.BooksReady(ns, n))
}
