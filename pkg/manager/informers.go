package manager

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	bookinformers "ydzs.io/book-controller/pkg/generated/informers/externalversions"
)

// NewInformerFactories returns the two shared informer factories the
// controller reads from: Books from the generated factory, ConfigMaps from
// client-go's. Both watch one namespace, or all when namespace is empty.
// The ConfigMap factory lists only ConfigMaps carrying our managed-by label,
// so the cache never holds anybody else's. The Book factory drops
// managedFields, which the controller never reads and which is often the
// largest part of an object; the ConfigMap informer's transform is the
// controller's own (controller.ProjectConfigMap, which controller.New
// installs), as it keeps only the fields the sync reads.
//
// A non-empty shardSelector (a metav1.ListOptions.ShardSelector, see
// shards.go) is sent with every list and watch of both, so that the API
// server sends only one shard's objects: the caches hold that shard alone.
func NewInformerFactories(kubeClient kubernetes.Interface, bookClient versioned.Interface, namespace string, resync time.Duration, shardSelector string) (kubeinformers.SharedInformerFactory, bookinformers.SharedInformerFactory) {
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, resync,
		kubeinformers.WithNamespace(namespace),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = controller.ManagedBySelector
			o.ShardSelector = shardSelector
		}),
	)
	bookOpts := []bookinformers.SharedInformerOption{
		bookinformers.WithNamespace(namespace),
		bookinformers.WithTransform(dropManagedFields),
	}
	if shardSelector != "" {
		bookOpts = append(bookOpts, bookinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.ShardSelector = shardSelector }))
	}
	bookFactory := bookinformers.NewSharedInformerFactoryWithOptions(bookClient, resync, bookOpts...)
	return kubeFactory, bookFactory
}

// dropManagedFields is an informer transform: it runs once per object before
// it enters the cache. Objects without metadata (tombstones) pass unchanged.
func dropManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
