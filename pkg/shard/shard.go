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

// Package shard splits the Books over replicas by a hash of their UID: the
// hash buckets, the shards' ranges of them and their selectors (this file),
// the gate that spreads shards over replicas (gate.go), the guard that
// keeps replicas of different shard counts from serving at once
// (count.go), and a slot per
// shard that competes for the shard's Lease and, while holding it, runs the
// shard's informers and controller behind a write fence of its own
// (slot.go, work.go). docs/sharding.md tells the whole story.
package shard

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// key is the field the API server hashes to place a Book in a shard. Books
// are sharded by UID: UIDs are random, so their hashes spread evenly
// whatever the namespaces are called and however many Books one of them
// holds. A Book's ConfigMap has a UID of its own, so ConfigMaps are not
// sharded by the server's hash but by BucketLabel, which the controller
// writes on each from its Book's UID (ConfigMapSelector).
const key = "object.metadata.uid"

// Buckets is the number of hash buckets: a UID's bucket is the top eight
// bits of its 64-bit FNV-1a hash, and each shard holds a run of whole
// buckets. The number is fixed, not the number of shards, so a ConfigMap's
// bucket label stays right when the shard count changes.
const Buckets = 256

// BucketLabel is on every ConfigMap the controller owns, whatever the
// number of shards: the bucket of its Book's UID (BucketOf), "0" to "255".
// Each shard's ConfigMap informer selects its buckets.
const BucketLabel = "webapp.ydzs.io/shard-bucket"

// Max bounds the number of shards: each shard costs every replica a leader
// elector polling its Lease, and the API server a watch per resource. It
// is below Buckets, so every shard holds at least four buckets.
const Max = 64

// bucketNames are the values of BucketLabel, made once: the ConfigMap
// cache and the desired ConfigMaps share these strings.
var bucketNames = func() [Buckets]string {
	var out [Buckets]string
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

// hash is the API server's 64-bit FNV-1a of a UID (sharding.HashField),
// as a number. HashField prints it as hex for the server's selectors, and
// printing and parsing it back cost every converged Book's sync (its
// desired bucket label) 0.15 of 3.6 µs and 2 allocations (go test
// ./pkg/controller -run '^$' -bench ConvergedSync), so the same hash is
// taken from hash/fnv directly. TestHashIsTheAPIServers holds the two to
// each other.
func hash(uid types.UID) uint64 {
	h := fnv.New64a()
	h.Write([]byte(uid)) // never fails
	return h.Sum64()
}

// BucketOf is the bucket of a Book's UID: the top eight bits of the hash
// the API server computes for it.
func BucketOf(uid types.UID) int { return int(hash(uid) >> 56) }

// BucketName is the value of BucketLabel for a bucket, one string per
// bucket shared by every caller; "" outside 0..Buckets-1.
func BucketName(bucket int) string {
	if bucket < 0 || bucket >= Buckets {
		return ""
	}
	return bucketNames[bucket]
}

// Shard is one of n shards: the buckets [First, Last), and so the range of
// the API server's hash of a Book's UID from First·2^56 to Last·2^56.
type Shard struct {
	Index       int
	First, Last int // the buckets First ≤ b < Last
}

// Equal splits the buckets into n runs as equal as whole buckets allow:
// shard i of n holds the buckets [⌊i·256/n⌋, ⌊(i+1)·256/n⌋). n must be
// 1..Max.
func Equal(n int) []Shard {
	out := make([]Shard, n)
	for i := range out {
		out[i] = Shard{Index: i, First: i * Buckets / n, Last: (i + 1) * Buckets / n}
	}
	return out
}

// bound is where bucket b starts in the hash space, written as the API
// server's shardRange() wants it: 0x and 16 lowercase hex digits, except
// 2^64, the end of the last bucket, which is 0x10000000000000000 (17
// digits). The server compares such strings by length first, so only that
// spelling of 2^64 is above every hash.
func bound(b int) string {
	if b == Buckets {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", uint64(b)<<56)
}

// Selector is the metav1.ListOptions.ShardSelector of the shard's Books.
func (s Shard) Selector() string {
	return fmt.Sprintf("shardRange(%s, '%s', '%s')", key, bound(s.First), bound(s.Last))
}

// ConfigMapSelector is the label selector of the shard's ConfigMaps: ours
// (managedBy, the managed-by requirement) of the shard's buckets.
func (s Shard) ConfigMapSelector(managedBy string) string {
	names := make([]string, 0, s.Last-s.First)
	for b := s.First; b < s.Last; b++ {
		names = append(names, bucketNames[b])
	}
	return fmt.Sprintf("%s,%s in (%s)", managedBy, BucketLabel, strings.Join(names, ","))
}

// Holds reports whether the shard holds the Book of that UID.
func (s Shard) Holds(uid types.UID) bool {
	b := BucketOf(uid)
	return s.First <= b && b < s.Last
}

// Of is the index of the shard, of n, that holds the Book of that UID:
// what the API server computes for each Book.
func Of(uid types.UID, n int) int {
	// The shard i with ⌊i·256/n⌋ ≤ b < ⌊(i+1)·256/n⌋.
	b := BucketOf(uid)
	return ((b+1)*n - 1) / Buckets
}

// LeaseName is the name of the Lease whose holder serves shard i:
// <leader-elect-id>-shard-<i>.
func LeaseName(id string, i int) string {
	return fmt.Sprintf("%s-shard-%d", id, i)
}
