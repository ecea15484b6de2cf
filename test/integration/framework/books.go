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
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// CreateWidth is how many Books the tests create at a time: more, on a
// 2-core machine, starves the API server that the controllers' Lease
// renewals go through, and replicas lose their leadership instead of
// syncing.
const CreateWidth = 8

// Parallel runs do(ctx, 0) … do(ctx, n-1), width at a time, and once all
// have returned fails the test with the first error, naming its index. It
// is every bounded parallel loop of the tests.
func Parallel(t testing.TB, n, width int, do func(ctx context.Context, i int) error) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	sem := make(chan struct{}, width)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := do(ctx, i); err != nil {
				once.Do(func() { first = fmt.Errorf("item %d of %d: %w", i, n, err) })
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// BookName is the name of the i-th of the Books named after prefix:
// prefix-00042.
func BookName(prefix string, i int) string { return fmt.Sprintf("%s-%05d", prefix, i) }

// NumberedBooks returns n Books for ns, ready to create: the i-th is
// named BookName(prefix, i), titled "Title of <its name>" and priced i.
func NumberedBooks(ns, prefix string, n int) []*webappv2.Book {
	out := make([]*webappv2.Book, n)
	for i := range out {
		name := BookName(prefix, i)
		out[i] = NewBook(ns, name, "Title of "+name, int32(i))
	}
	return out
}

// CreateBooks creates NumberedBooks(ns, prefix, n) (CreateAll) and returns
// them as created.
func (e *Env) CreateBooks(t testing.TB, ns, prefix string, n int) []*webappv2.Book {
	t.Helper()
	return e.CreateAll(t, NumberedBooks(ns, prefix, n))
}

// CreateAll creates books, CreateWidth at a time, and returns them as
// created, in the same order. A create that a control plane recovering from
// a fault refuses is retried (RetryTransient); one whose answer was lost
// finds its Book on the retry, which then counts as created.
func (e *Env) CreateAll(t testing.TB, books []*webappv2.Book) []*webappv2.Book {
	t.Helper()
	out := make([]*webappv2.Book, len(books))
	Parallel(t, len(books), CreateWidth, func(ctx context.Context, i int) error {
		client := e.Books.WebappV2().Books(books[i].Namespace)
		var err error
		out[i], err = createOnce(ctx, books[i], client.Create, client.Get)
		return err
	})
	return out
}

// createOnce creates obj, retrying what RetryTransient retries; a create
// whose answer was lost finds its object on the retry, which then counts
// as created.
func createOnce[T metav1.Object](ctx context.Context, obj T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	get func(context.Context, string, metav1.GetOptions) (T, error)) (T, error) {
	var created T
	retried := false
	err := RetryTransient(ctx, func() error {
		var err error
		created, err = create(ctx, obj, metav1.CreateOptions{})
		if retried && apierrors.IsAlreadyExists(err) {
			created, err = get(ctx, obj.GetName(), metav1.GetOptions{})
		}
		retried = true
		return err
	})
	if err != nil {
		return created, fmt.Errorf("creating Book %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return created, nil
}

// RetryTransient calls fn until it succeeds, returns an error that retrying
// can't fix, or a minute has passed. Conflicts, throttling, timeouts and a
// control plane that is down are retried, with a backoff from 50 ms to 2 s.
func RetryTransient(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(time.Minute)
	delay := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
			apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) ||
			time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}
