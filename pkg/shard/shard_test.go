package shard

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	serversharding "k8s.io/apiserver/pkg/sharding"
)

// TestShardsCoverTheHashSpace: the ranges are contiguous from 0 to 2^64,
// written as the API server's parser accepts them, and every namespace
// matches exactly one shard's selector as the server evaluates it, the one
// Of names.
func TestShardsCoverTheHashSpace(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7, 30, Max} {
		shards := Equal(n)
		if len(shards) != n || shards[0].Start != "0x0000000000000000" || shards[n-1].End != "0x10000000000000000" {
			t.Fatalf("Equal(%d) = %v: want %d ranges from 0x0000000000000000 to 0x10000000000000000", n, shards, n)
		}
		selectors := make([]apisharding.Selector, n)
		for i, s := range shards {
			if i > 0 && s.Start != shards[i-1].End {
				t.Errorf("Equal(%d): shard %d starts at %s, shard %d ended at %s", n, i, s.Start, i-1, shards[i-1].End)
			}
			sel, err := serversharding.Parse(s.Selector())
			if err != nil {
				t.Fatalf("Equal(%d): the API server rejects %q: %v", n, s.Selector(), err)
			}
			selectors[i] = sel
		}
		for k := range 500 {
			ns := fmt.Sprintf("ns-%d", k)
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}
			var in []int
			for i, sel := range selectors {
				if ok, err := sel.Matches(obj); err != nil {
					t.Fatal(err)
				} else if ok {
					in = append(in, i)
				}
			}
			if len(in) != 1 || in[0] != Of(ns, n) {
				t.Fatalf("Equal(%d): namespace %s matches shards %v, Of says %d", n, ns, in, Of(ns, n))
			}
		}
	}
}

// TestShardBoundaries: shard i starts at floor(i × 2^64 / n).
func TestShardBoundaries(t *testing.T) {
	got := Equal(3)
	want := []Shard{
		{0, "0x0000000000000000", "0x5555555555555555"},
		{1, "0x5555555555555555", "0xaaaaaaaaaaaaaaaa"},
		{2, "0xaaaaaaaaaaaaaaaa", "0x10000000000000000"},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Equal(3)[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := Equal(2)[1].Selector(); s != "shardRange(object.metadata.namespace, '0x8000000000000000', '0x10000000000000000')" {
		t.Errorf("Equal(2)[1].Selector() = %s", s)
	}
}

// TestEqualRangesCrowdSimilarNames records why At exists: FNV-1a
// leaves the top bits of names that differ only at the end alike, so equal
// ranges put team-00 … team-29 all in one shard; balanced boundaries split
// them ten, ten and ten, and the server's own selectors agree.
func TestEqualRangesCrowdSimilarNames(t *testing.T) {
	weights := map[string]int{}
	equal := make([]int, 3)
	for i := range 30 {
		ns := fmt.Sprintf("team-%02d", i)
		weights[ns] = 1
		equal[Of(ns, 3)]++
	}
	if equal[0] != 30 && equal[1] != 30 && equal[2] != 30 {
		t.Errorf("equal ranges split team-00..29 as %v; docs/sharding.md says all in one shard", equal)
	}
	b := BalancedBoundaries(weights, 3)
	shards, err := At(b)
	if err != nil {
		t.Fatalf("BalancedBoundaries gave %q, which At rejects: %v", b, err)
	}
	balanced := make([]int, 3)
	for ns := range weights {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
		i := In(ns, shards)
		sel, err := serversharding.Parse(shards[i].Selector())
		if err != nil {
			t.Fatal(err)
		}
		if ok, _ := sel.Matches(obj); !ok {
			t.Fatalf("%s: In says shard %d, whose selector the server does not match", ns, i)
		}
		balanced[i]++
	}
	if balanced[0] != 10 || balanced[1] != 10 || balanced[2] != 10 {
		t.Errorf("balanced boundaries %q split team-00..29 as %v, want 10 each", b, balanced)
	}
	// Weights count: one heavy namespace is a shard of its own.
	weights["team-07"] = 1000
	b = BalancedBoundaries(weights, 3)
	shards, _ = At(b)
	for ns := range weights {
		if ns != "team-07" && In(ns, shards) == In("team-07", shards) {
			t.Errorf("with team-07 weighing 1000, %s shares its shard (boundaries %q)", ns, b)
			break
		}
	}
	// Fewer namespaces than shards: equal ranges.
	if got := BalancedBoundaries(map[string]int{"a": 1}, 3); len(got) != 2 || got[0] != Equal(3)[1].Start {
		t.Errorf("one namespace, 3 shards: %q, want the equal ranges' boundaries", got)
	}
}
