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

import "testing"

// TestLiveEditsAreDistinctBooks: the live writer edits each chosen Book
// once, of the N there are: liveOps of them, or all N when there are fewer
// (a smoke run at N=50 once waited for 100 edits of 50 Books). The Books are
// those writeLive's loop picks (editedName for each i below liveEdits), and
// the counts wanted are written out, not computed by the code under test.
func TestLiveEditsAreDistinctBooks(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 1}, {50, 50}, {100, 100}, {1000, 100}, {50000, 100}} {
		seen := map[string]bool{}
		for i := range liveOps { // writeLive's ops, an edit each
			if i >= liveEdits(c.n) {
				continue // writeLive skips these
			}
			name := editedName(i, c.n)
			if seen[name] {
				t.Fatalf("N=%d: %s edited twice", c.n, name)
			}
			seen[name] = true
			if name >= bookName(c.n) {
				t.Fatalf("N=%d: %s is not one of the N Books", c.n, name)
			}
		}
		if len(seen) != c.want {
			t.Errorf("N=%d: %d Books edited, want %d", c.n, len(seen), c.want)
		}
		// What the phase waits for and reports: the edits made.
		if got := liveEdits(c.n); got != c.want {
			t.Errorf("N=%d: liveEdits %d, want %d", c.n, got, c.want)
		}
	}
}
