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

// Package poll is how every test in this repository waits for something:
// the unit tests of pkg/..., the integration tests under test/integration and
// the chaos tests. It lives under internal/ so that pkg/controller's own
// tests can import it (test/integration/framework imports pkg/controller,
// which would make a cycle) and nothing outside the repository can.
//
// A check returns nil once what is awaited holds, and otherwise an error
// that describes what it saw instead. When time runs out, the failure names
// what was awaited and shows that last observation, so a timeout says why
// and not only that it happened.
package poll

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Check looks once: nil when what is awaited holds, else an error that
// describes the state it observed.
type Check func(ctx context.Context) error

// Until calls check at once and then every interval until it returns nil.
// If timeout passes or ctx ends first, it returns an error that names what
// was awaited and carries check's last observation.
func Until(ctx context.Context, what string, interval, timeout time.Duration, check Check) error {
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		err := check(ctx)
		var stop stopError
		if errors.As(err, &stop) {
			return false, err
		}
		if err != nil && ctx.Err() != nil && last != nil {
			// Cut short by the deadline: the observation before it says more
			// than "context deadline exceeded".
			return false, nil
		}
		last = err
		return err == nil, nil
	})
	if err == nil {
		return nil
	}
	var stop stopError
	if errors.As(err, &stop) {
		return fmt.Errorf("gave up after %v waiting for %s: %w", time.Since(start).Round(time.Millisecond), what, stop.err)
	}
	how := "timed out"
	if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		how = "stopped (" + err.Error() + ")"
	}
	if last == nil {
		return fmt.Errorf("%s after %v waiting for %s; never checked", how, time.Since(start).Round(time.Millisecond), what)
	}
	return fmt.Errorf("%s after %v waiting for %s; last seen: %w", how, time.Since(start).Round(time.Millisecond), what, last)
}

// Eventually is Until for a test: it fails t with Until's error. The check
// runs on the test's goroutine, so it may call t.Fatal itself when what it
// sees can never turn into what is awaited (a process that exited).
func Eventually(t testing.TB, what string, interval, timeout time.Duration, check Check) {
	t.Helper()
	if err := Until(t.Context(), what, interval, timeout, check); err != nil {
		t.Fatal(err)
	}
}

// Stop is what a check returns when waiting longer cannot help (the
// process it waits for has exited): Until returns at once, with err. In a
// test, a check can call t.Fatal instead.
func Stop(err error) error { return stopError{err} }

type stopError struct{ err error }

func (s stopError) Error() string { return s.err.Error() }
func (s stopError) Unwrap() error { return s.err }

// Done is what a check returns for a condition it can state as a bool: nil
// when done, else the observed state, formatted as by fmt.Sprintf.
func Done(done bool, format string, args ...any) error {
	if done {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// Unchanged is a check that value has not changed for quiet: a counter of
// requests or reconciles that has stopped moving. Its clock starts at the
// first look.
func Unchanged[T comparable](quiet time.Duration, value func() T) Check {
	var last T
	var since time.Time
	return func(context.Context) error {
		if v := value(); since.IsZero() || v != last {
			last, since = v, time.Now()
		}
		still := time.Since(since)
		return Done(still >= quiet, "%v, unchanged for %v", last, still.Round(time.Millisecond))
	}
}
