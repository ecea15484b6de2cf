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
// once, of the N there are, also when N is below liveOps (a smoke run at
// N=50 once waited for 100 edits of 50 Books).
func TestLiveEditsAreDistinctBooks(t *testing.T) {
	for _, n := range []int{1, 50, 100, 1000, 50000} {
		seen := map[string]bool{}
		for i := range liveEdits(n) {
			name := editedName(i, n)
			if seen[name] {
				t.Fatalf("N=%d: %s edited twice", n, name)
			}
			seen[name] = true
			if name >= bookName(n) {
				t.Fatalf("N=%d: %s is not one of the N Books", n, name)
			}
		}
		if want := min(n, liveOps); len(seen) != want {
			t.Errorf("N=%d: %d Books edited, want %d", n, len(seen), want)
		}
	}
}
