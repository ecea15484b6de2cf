// Command shard-boundaries prints the --shard-boundaries that split the
// Books of a cluster into -shards shards of about equal size: it counts the
// Books of every namespace and places each boundary between two namespaces'
// hashes (shard.BalancedBoundaries). Give every replica the same value,
// with every replica stopped (docs/sharding.md).
//
//	go run ./hack/shard-boundaries -shards 3 [-kubeconfig PATH] [-by namespaces]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/shard"
)

func main() {
	shards := flag.Int("shards", 3, "number of shards (book-controller --shards)")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (default $KUBECONFIG)")
	by := flag.String("by", "books", "balance the shards' Books (books) or their namespaces (namespaces)")
	flag.Parse()
	if err := run(*shards, *kubeconfig, *by); err != nil {
		fmt.Fprintln(os.Stderr, "shard-boundaries:", err)
		os.Exit(1)
	}
}

func run(shards int, kubeconfig, by string) error {
	if shards < 2 || shards > shard.Max {
		return fmt.Errorf("-shards must be between 2 and %d, got %d", shard.Max, shards)
	}
	if by != "books" && by != "namespaces" {
		return fmt.Errorf("-by must be books or namespaces, got %q", by)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig %q: %w", kubeconfig, err)
	}
	client, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	weights := map[string]int{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := client.WebappV1().Books(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing Books: %w", err)
		}
		for _, b := range list.Items {
			if by == "books" || weights[b.Namespace] == 0 {
				weights[b.Namespace]++
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	if len(weights) < shards {
		return fmt.Errorf("%d namespaces hold Books, fewer than %d shards: keep the equal ranges (no --shard-boundaries)", len(weights), shards)
	}
	boundaries := shard.BalancedBoundaries(weights, shards)
	ranges, err := shard.At(boundaries)
	if err != nil {
		return err
	}
	per := make([]int, shards)
	for ns, w := range weights {
		per[shard.In(ns, ranges)] += w
	}
	fmt.Fprintf(os.Stderr, "%s per shard: %v\n", by, per)
	fmt.Printf("--shard-boundaries=%s\n", strings.Join(boundaries, ","))
	return nil
}
