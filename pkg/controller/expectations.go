package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// CreateObservedTimeout bounds how long a sync trusts a ConfigMap it created
// itself but has not yet seen in the ConfigMap cache. After it, the sync
// acts on what the cache shows again. The bound matters only when the create
// event never arrives: the ConfigMap was deleted before the informer saw it
// and a relist skipped both events. Like kube's ControllerExpectations
// timeout, but shorter, since one ConfigMap per Book is cheap to look at again.
const CreateObservedTimeout = 30 * time.Second

// The Book and ConfigMap informers have watches of their own, so the event
// of our status write can overtake the event of the ConfigMap created just
// before it. A sync in that window finds no ConfigMap in the cache and
// creates it again, only to be told 409 AlreadyExists and read it back: two
// wasted requests per Book, hundreds per burst with many workers. Remembering
// our own creates until the cache shows them (kube's "expectations") closes
// that window.

// expectConfigMap records that this controller has just created the
// ConfigMap for key.
func (c *Controller) expectConfigMap(key cache.ObjectName) {
	c.configMapsCreated.Store(key, c.clock.Now())
}

// observeConfigMap forgets the expectation for a ConfigMap the informer has
// delivered, whatever the event: the cache now speaks for it. A Book's
// ConfigMap has the Book's namespace and name, so the keys are the same.
func (c *Controller) observeConfigMap(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.configMapsCreated.Delete(key)
}

// awaitingOwnConfigMap reports whether the ConfigMap cache has yet to show
// the ConfigMap this controller created for key. If so, it checks the key
// again once the expectation would time out, in case the event never comes;
// normally the ConfigMap's add event requeues the key long before that.
func (c *Controller) awaitingOwnConfigMap(ctx context.Context, key cache.ObjectName) bool {
	v, ok := c.configMapsCreated.Load(key)
	if !ok {
		return false
	}
	if _, err := c.configMapsLister.ConfigMaps(key.Namespace).Get(key.Name); !apierrors.IsNotFound(err) {
		c.configMapsCreated.CompareAndDelete(key, v)
		return false
	}
	left := CreateObservedTimeout - c.clock.Since(v.(time.Time))
	if left <= 0 {
		c.configMapsCreated.CompareAndDelete(key, v)
		return false
	}
	klog.FromContext(ctx).V(4).Info("Cache behind our ConfigMap create; waiting for its event", "book", key)
	c.queue.AddAfter(key, left)
	return true
}
