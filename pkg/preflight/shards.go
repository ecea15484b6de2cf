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

package preflight

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/shard"
)

// shardedListAndWatchHint is the fix for an API server that ignores shard
// selectors.
const shardedListAndWatchHint = "start kube-apiserver with --feature-gates=ShardedListAndWatch=true (alpha since Kubernetes v1.36)"

// Shards checks that the API server filters lists and watches by
// shard: an API server without the ShardedListAndWatch feature gate ignores
// ListOptions.ShardSelector and sends every object, so each replica would
// sync every Book, all of them at once. The proof is ListMeta.ShardInfo,
// which the server sets only when it applied the selector. Lists of custom
// resources do not carry it (in v1.37 the unstructured list the CRD handler
// builds has no place for it, although it filters them as it filters
// ConfigMaps: the gate is the API server's, for every resource), so the
// proof is on ConfigMaps (listed with the selector of shard s's Books:
// any list by a hash of the UID proves the server applies them), and the
// Books listed must all be in the shard, by the hash of their UID.
func Shards(ctx context.Context, host, namespace string, books versioned.Interface, kube kubernetes.Interface, s shard.Shard) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	cmList, err := kube.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{
		ShardSelector: s.Selector(), LabelSelector: controller.ManagedBySelector, Limit: 1})
	if err != nil {
		return fmt.Errorf("listing ConfigMaps by shard at %s: %w", host, err)
	}
	if cmList.ShardInfo == nil {
		return fmt.Errorf("the API server at %s ignores shard selectors (no shardInfo in its lists), which --shards needs: %s",
			host, shardedListAndWatchHint)
	}
	bookList, err := books.WebappV2().Books(namespace).List(ctx, metav1.ListOptions{ShardSelector: s.Selector(), Limit: 100})
	if err != nil {
		return fmt.Errorf("listing Books by shard at %s: %w", host, err)
	}
	for _, b := range bookList.Items {
		if !s.Holds(b.UID) {
			return fmt.Errorf("the API server at %s filters ConfigMaps by shard but not Books (Book %s/%s, UID %s, is outside %s): --shards cannot work with it",
				host, b.Namespace, b.Name, b.UID, s.Selector())
		}
	}
	return nil
}
