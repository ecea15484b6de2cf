// Package shard splits the Books over replicas by namespace hash: the hash
// ranges and their selectors (this file), the gate that spreads shards
// over replicas (gate.go), and a slot per shard that competes for the
// shard's Lease and, while holding it, runs the shard's informers and
// controller behind a write fence of its own (slot.go, work.go).
// docs/sharding.md tells the whole story.
package shard

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/sharding"
)

// key is the field the API server hashes to place an object in a
// shard. Books are sharded by namespace, not by UID: a Book and its
// ConfigMap share a namespace but not a UID, and the controller must find
// a Book's ConfigMap (and a ConfigMap's Book) in the same shard's caches.
// Sharded by UID, the ConfigMap of a Book would be in another replica's
// cache, or in none. The price is that one namespace is never split: a
// namespace holding most Books makes its shard the busiest.
const key = "object.metadata.namespace"

// Max bounds the number of shards: each shard costs every replica a leader
// elector polling its Lease, and the API server a watch per resource.
const Max = 64

// Shard is one range of the API server's 64-bit FNV-1a hash of a Book's
// namespace, [Start, End): one of n equal ones (Equal), or one between
// boundaries (At).
type Shard struct {
	Index int
	// Start and End are written as the API server's shardRange() wants
	// them: 0x and 16 lowercase hex digits, except the end of the last
	// range, 2^64, which is 0x10000000000000000 (17 digits). The server
	// compares such strings by length first, so only that spelling of 2^64
	// is above every hash.
	Start, End string
}

// Selector is the metav1.ListOptions.ShardSelector of the shard.
func (s Shard) Selector() string {
	return fmt.Sprintf("shardRange(%s, '%s', '%s')", key, s.Start, s.End)
}

// Holds reports whether the shard holds the Books of namespace.
func (s Shard) Holds(namespace string) bool {
	hash := "0x" + sharding.HashField(namespace)
	return !sharding.HexLess(hash, s.Start) && sharding.HexLess(hash, s.End)
}

// Equal splits the hash space into n ranges of equal width (to within
// one), shard i starting at floor(i × 2^64 / n).
func Equal(n int) []Shard {
	bound := func(i int) string {
		if i == n {
			return "0x10000000000000000"
		}
		// i × 2^64 / n, the 128-bit dividend being i in the high word.
		q, _ := bits.Div64(uint64(i), 0, uint64(n))
		return fmt.Sprintf("0x%016x", q)
	}
	out := make([]Shard, n)
	for i := range out {
		out[i] = Shard{Index: i, Start: bound(i), End: bound(i + 1)}
	}
	return out
}

// Of is the index of the shard, of n equal ones, that holds the Books of
// namespace: what the API server computes for each object.
func Of(namespace string, n int) int { return In(namespace, Equal(n)) }

// In is the index of the shard that holds the Books of namespace.
func In(namespace string, shards []Shard) int {
	for _, s := range shards {
		if s.Holds(namespace) {
			return s.Index
		}
	}
	return len(shards) - 1 // unreachable: the ranges cover the hash space
}

// At splits the hash space at the given boundaries (0x and 16 hex
// digits each, strictly increasing, above 0): len(boundaries)+1 shards.
//
// Equal ranges suit keys whose hashes spread over the whole space, such as
// UIDs. FNV-1a spreads short strings that differ only at the end (team-01,
// team-02, ...) over its low and middle bits only: their hashes share the
// top ten bits or more, so equal ranges put all of them in one shard.
// Boundaries placed between the namespaces' actual hashes
// (BalancedBoundaries) split them evenly.
func At(boundaries []string) ([]Shard, error) {
	points := []string{"0x0000000000000000"}
	for _, b := range boundaries {
		b = strings.TrimSpace(b)
		if len(b) != 18 || !strings.HasPrefix(b, "0x") {
			return nil, fmt.Errorf("shard boundary %q: want 0x and 16 hex digits, e.g. 0x5555555555555555", b)
		}
		if _, err := strconv.ParseUint(b[2:], 16, 64); err != nil || strings.ToLower(b) != b {
			return nil, fmt.Errorf("shard boundary %q: want 0x and 16 lowercase hex digits", b)
		}
		if b <= points[len(points)-1] {
			return nil, fmt.Errorf("shard boundaries must be strictly increasing and above 0x0000000000000000: %q after %q", b, points[len(points)-1])
		}
		points = append(points, b)
	}
	points = append(points, "0x10000000000000000")
	out := make([]Shard, len(points)-1)
	for i := range out {
		out[i] = Shard{Index: i, Start: points[i], End: points[i+1]}
	}
	return out, nil
}

// BalancedBoundaries returns the n-1 boundaries that split the given
// namespaces into n shards of about equal weight (their Books, say): the
// namespaces sorted by hash, each boundary just above the last namespace of
// a shard. New namespaces fall wherever their hash does.
func BalancedBoundaries(weights map[string]int, n int) []string {
	type ns struct {
		hash   uint64
		weight int
	}
	var all []ns
	total := 0
	for name, w := range weights {
		h, _ := strconv.ParseUint(sharding.HashField(name), 16, 64)
		all = append(all, ns{h, w})
		total += w
	}
	slices.SortFunc(all, func(a, b ns) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	if len(all) < n { // fewer namespaces than shards: equal ranges
		var out []string
		for _, sh := range Equal(n)[1:] {
			out = append(out, sh.Start)
		}
		return out
	}
	// Shard k ends with the first namespace at which the running
	// weight reaches k+1 n-ths of the total, after the previous shard's
	// last, and leaving a namespace for each shard to come.
	out := make([]string, 0, n-1)
	sum, i := 0, -1
	for k := range n - 1 {
		i++
		sum += all[i].weight
		for sum*n < (k+1)*total && i < len(all)-(n-k) {
			i++
			sum += all[i].weight
		}
		out = append(out, fmt.Sprintf("0x%016x", all[i].hash+1))
	}
	return out
}

// LeaseName is the name of the Lease whose holder serves shard i:
// <leader-elect-id>-shard-<i>.
func LeaseName(id string, i int) string {
	return fmt.Sprintf("%s-shard-%d", id, i)
}

// Ranges are the hash ranges of n shards: equal, or at the boundaries
// given (then one fewer than n).
func Ranges(n int, boundaries []string) ([]Shard, error) {
	if len(boundaries) == 0 {
		return Equal(n), nil
	}
	shards, err := At(boundaries)
	if err != nil {
		return nil, err
	}
	if len(shards) != n {
		return nil, fmt.Errorf("%d shard boundaries make %d shards, not %d: give one fewer boundary than shards",
			len(boundaries), len(shards), n)
	}
	return shards, nil
}
