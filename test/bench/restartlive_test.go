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
