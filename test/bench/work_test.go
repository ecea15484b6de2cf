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

package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestWorkRunsEveryIndexOnceAndReportsAnError(t *testing.T) {
	const n = 500
	var seen [n]atomic.Int32
	boom := errors.New("boom")
	_, err := work(context.Background(), n, 16, 0, func(i int) error {
		seen[i].Add(1)
		if i == 7 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("work returned %v, want the failing index's error", err)
	}
	for i := range seen {
		if got := seen[i].Load(); got != 1 {
			t.Fatalf("index %d ran %d times, want once (an error must not stop the others)", i, got)
		}
	}
}
