package manager

import (
	"fmt"
	"math/bits"

	"k8s.io/apimachinery/pkg/sharding"
)

// ShardKey is the field the API server hashes to place an object in a
// shard. Books are sharded by namespace, not by UID: a Book and its
// ConfigMap share a namespace but not a UID, and the controller must find
// a Book's ConfigMap (and a ConfigMap's Book) in the same shard's caches.
// Sharded by UID, the ConfigMap of a Book would be in another replica's
// cache, or in none. The price is that one namespace is never split: a
// namespace holding most Books makes its shard the busiest.
const ShardKey = "object.metadata.namespace"

// Shard is one of N equal ranges of the API server's 64-bit FNV-1a hash of
// ShardKey, [Start, End).
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
	return fmt.Sprintf("shardRange(%s, '%s', '%s')", ShardKey, s.Start, s.End)
}

// Holds reports whether the shard holds the Books of namespace.
func (s Shard) Holds(namespace string) bool {
	hash := "0x" + sharding.HashField(namespace)
	return !sharding.HexLess(hash, s.Start) && sharding.HexLess(hash, s.End)
}

// Shards splits the hash space into n ranges of equal width (to within
// one), shard i starting at floor(i × 2^64 / n).
func Shards(n int) []Shard {
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

// ShardOf is the index of the shard, of n, that holds the Books of
// namespace: what the API server computes for each object.
func ShardOf(namespace string, n int) int {
	for _, s := range Shards(n) {
		if s.Holds(namespace) {
			return s.Index
		}
	}
	return n - 1 // unreachable: the ranges cover the hash space
}

// ShardLeaseName is the name of the Lease whose holder serves shard i:
// <leader-elect-id>-shard-<i>.
func ShardLeaseName(id string, i int) string {
	return fmt.Sprintf("%s-shard-%d", id, i)
}
