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

package shard

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	serversharding "k8s.io/apiserver/pkg/sharding"
)

// TestShardsCoverTheHashSpace: the shards' bucket runs are contiguous from
// 0 to 256, their ranges written as the API server's parser accepts them,
// and every UID matches exactly one shard's selector as the server
// evaluates it, the one Of names and whose ConfigMap selector matches the
// UID's bucket label.
func TestShardsCoverTheHashSpace(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7, 30, Max} {
		shards := Equal(n)
		if len(shards) != n || shards[0].First != 0 || shards[n-1].Last != Buckets {
			t.Fatalf("Equal(%d) = %v: want %d runs of buckets from 0 to %d", n, shards, n, Buckets)
		}
		selectors := make([]apisharding.Selector, n)
		cmSelectors := make([]labels.Selector, n)
		for i, s := range shards {
			if i > 0 && s.First != shards[i-1].Last {
				t.Errorf("Equal(%d): shard %d starts at bucket %d, shard %d ended at %d", n, i, s.First, i-1, shards[i-1].Last)
			}
			sel, err := serversharding.Parse(s.Selector())
			if err != nil {
				t.Fatalf("Equal(%d): the API server rejects %q: %v", n, s.Selector(), err)
			}
			selectors[i] = sel
			if cmSelectors[i], err = labels.Parse(s.ConfigMapSelector("a=b")); err != nil {
				t.Fatalf("Equal(%d): ConfigMap selector %q: %v", n, s.ConfigMapSelector("a=b"), err)
			}
		}
		for range 500 {
			uid := uuid.NewUUID()
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: uid}}
			cmLabels := labels.Set{"a": "b", BucketLabel: BucketName(BucketOf(uid))}
			var in, cmIn []int
			for i := range shards {
				if ok, err := selectors[i].Matches(obj); err != nil {
					t.Fatal(err)
				} else if ok {
					in = append(in, i)
				}
				if cmSelectors[i].Matches(cmLabels) {
					cmIn = append(cmIn, i)
				}
			}
			if len(in) != 1 || in[0] != Of(uid, n) || !shards[in[0]].Holds(uid) || !slices.Equal(in, cmIn) {
				t.Fatalf("Equal(%d): UID %s (bucket %d) matches shards %v, its ConfigMap %v; Of says %d",
					n, uid, BucketOf(uid), in, cmIn, Of(uid, n))
			}
		}
	}
}

// TestShardBuckets: shard i of n holds buckets [⌊i·256/n⌋, ⌊(i+1)·256/n⌋),
// each a range of whole buckets of the hash space.
func TestShardBuckets(t *testing.T) {
	want := []Shard{{0, 0, 85}, {1, 85, 170}, {2, 170, 256}}
	if got := Equal(3); !slices.Equal(got, want) {
		t.Errorf("Equal(3) = %+v, want %+v", got, want)
	}
	if s := Equal(3)[1].Selector(); s != "shardRange(object.metadata.uid, '0x5500000000000000', '0xaa00000000000000')" {
		t.Errorf("Equal(3)[1].Selector() = %s", s)
	}
	if s := Equal(2)[1].Selector(); s != "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')" {
		t.Errorf("Equal(2)[1].Selector() = %s", s)
	}
	if s := Equal(64)[63].ConfigMapSelector("m=c"); s != "m=c,webapp.ydzs.io/shard-bucket in (252,253,254,255)" {
		t.Errorf("Equal(64)[63].ConfigMapSelector = %s", s)
	}
	if BucketName(-1) != "" || BucketName(Buckets) != "" || BucketName(7) != "7" {
		t.Errorf("BucketName: %q %q %q", BucketName(-1), BucketName(Buckets), BucketName(7))
	}
}

// TestUIDsSpreadEvenly is why Books are sharded by UID: 3,000 random UIDs
// (one namespace's Books, say) fall into 3 shards with the largest at most
// 1.15× the mean, and the buckets are evenly used, whatever the
// namespaces are called.
func TestUIDsSpreadEvenly(t *testing.T) {
	const books = 3000
	per := make([]int, 3)
	buckets := make([]int, Buckets)
	rnd := rand.New(rand.NewPCG(26, 4)) // the same UIDs each run: no flake
	for range books {
		uid := randomUID(rnd)
		per[Of(uid, 3)]++
		buckets[BucketOf(uid)]++
	}
	if m := slices.Max(per); float64(m) > 1.15*books/3 {
		t.Errorf("3,000 UIDs over 3 shards: %v, the largest above 1.15× the mean", per)
	}
	// Buckets of about 11.7 UIDs each: none empty or above 3× that.
	if slices.Min(buckets) == 0 || float64(slices.Max(buckets)) > 3.0*books/Buckets {
		t.Errorf("3,000 UIDs over %d buckets: min %d, max %d", Buckets, slices.Min(buckets), slices.Max(buckets))
	}
}

// randomUID is a version-4 UUID as the API server writes one, from rnd.
func randomUID(rnd *rand.Rand) types.UID {
	var b [16]byte
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
}

// TestHashIsTheAPIServers: hash, computed in place, is the number
// sharding.HashField prints, for random UIDs and for odd strings.
func TestHashIsTheAPIServers(t *testing.T) {
	uids := []types.UID{"", "a", "\xff\x00", "team-01/book-1"}
	for range 10000 {
		uids = append(uids, uuid.NewUUID())
	}
	for _, uid := range uids {
		if got, want := fmt.Sprintf("%016x", hash(uid)), apisharding.HashField(string(uid)); got != want {
			t.Fatalf("hash(%q) = %s, the API server's %s", uid, got, want)
		}
	}
}
