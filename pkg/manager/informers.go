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

package manager

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions"
	bookinformersv2 "ydzs.io/book-controller/pkg/generated/informers/externalversions/webapp/v2"
)

// partition narrows the informers to a part of the Books and their
// ConfigMaps (a shard); nil: all of them.
type partition interface {
	// Selector is the Books' list and watch ShardSelector.
	Selector() string
	// ConfigMapSelector is the ConfigMaps' label selector, base and more.
	ConfigMapSelector(base string) string
}

// newInformerFactories returns the two shared informer factories the
// controller reads from: Books from the generated factory, ConfigMaps from
// client-go's. Both watch one namespace, or all when namespace is empty.
// The ConfigMap factory lists only ConfigMaps carrying our managed-by label,
// so the cache never holds anybody else's. What each cache keeps of an
// object is the controller's business: controller.New installs its
// transforms (Books compacted, ConfigMaps projected to the fields the sync
// reads).
//
// Neither informer keeps the namespace index the factories add by default:
// the controller reads by key, and a lister's List, which would use the
// index, scans the whole cache without it; each entry of the index costs
// memory and work on every watch event.
//
// With a partition (non-nil: a shard), every list and watch of Books
// carries the shard's ShardSelector, so that the API server sends only the
// Books whose UID hashes into the shard, and every list and watch of
// ConfigMaps selects, besides the managed-by label, the bucket labels of
// the shard (a ConfigMap's UID is not its Book's, so the server's hash
// cannot place it): the caches hold that shard alone.
func newInformerFactories(kubeClient kubernetes.Interface, bookClient versioned.Interface, namespace string, resync time.Duration, s partition) (kubeinformers.SharedInformerFactory, bookinformers.SharedInformerFactory) {
	cmSelector, shardSelector := controller.ManagedBySelector, ""
	if s != nil {
		cmSelector, shardSelector = s.ConfigMapSelector(controller.ManagedBySelector), s.Selector()
	}
	cmTweak := func(o *metav1.ListOptions) { o.LabelSelector = cmSelector }
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(namespace), kubeinformers.WithTweakListOptions(cmTweak))
	// The factory hands out the informer made first for a type, here one
	// without indexers, to Core().V1().ConfigMaps() too.
	kubeFactory.InformerFor(&corev1.ConfigMap{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredConfigMapInformer(client, namespace, resync, cache.Indexers{}, cmTweak)
	})

	bookTweak := func(o *metav1.ListOptions) { o.ShardSelector = shardSelector }
	bookFactory := bookinformers.NewSharedInformerFactoryWithOptions(bookClient, resync,
		bookinformers.WithNamespace(namespace), bookinformers.WithTweakListOptions(bookTweak))
	bookFactory.InformerFor(&webappv2.Book{}, func(client versioned.Interface, resync time.Duration) cache.SharedIndexInformer {
		return bookinformersv2.NewFilteredBookInformer(client, namespace, resync, cache.Indexers{}, bookTweak)
	})
	return kubeFactory, bookFactory
}
