package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// CreateObservedTimeout bounds how long a sync trusts a ConfigMap it created
// itself but has not yet seen in the ConfigMap cache. After it, the sync
// acts on what the cache shows again. The bound matters only when the create
// event never arrives: the ConfigMap was deleted before the informer saw it
// and a relist skipped both events. Like kube's ControllerExpectations
// timeout, but shorter, since one ConfigMap per Book is cheap to look at again.
const CreateObservedTimeout = 30 * time.Second

// A sync right after one of our own writes can find the caches without it,
// and acting on that would only waste requests (kube's controllers keep
// "expectations" for the same reason):
//   - The Book cache still holds the version our status write started from.
//     A sync then (the ConfigMap's add event usually comes first) would
//     compute the status again from stale data and get a 409.
//   - The Book and ConfigMap informers have watches of their own, so the
//     event of our status write can overtake the event of the ConfigMap
//     created just before it. A sync in that window would create the
//     ConfigMap again, be told 409 AlreadyExists and read it back: two wasted
//     requests per Book, hundreds per burst with many workers.
// In both cases the awaited watch event requeues the Book.

// cacheBehindOwnWrites reports whether the caches have yet to show a write
// this controller made for book, in which case the sync should wait.
func (c *Controller) cacheBehindOwnWrites(ctx context.Context, book *webappv1.Book) bool {
	key := cache.MetaObjectToName(book)
	if from, ok := c.statusWrittenFrom.Load(key); ok {
		if from == book.ResourceVersion {
			klog.FromContext(ctx).V(4).Info("Cache behind our status write; waiting for its event", "book", key)
			return true
		}
		c.statusWrittenFrom.CompareAndDelete(key, from)
	}
	return c.awaitingOwnConfigMap(ctx, key)
}

// expectStatus records that the status of book, as the cache showed it, was
// just written and became written.
func (c *Controller) expectStatus(book, written *webappv1.Book) {
	if book.ResourceVersion != "" && written.ResourceVersion != book.ResourceVersion {
		c.statusWrittenFrom.Store(cache.MetaObjectToName(book), book.ResourceVersion)
	}
}

// forgetExpectations drops what is remembered for a Book that is gone.
func (c *Controller) forgetExpectations(key cache.ObjectName) {
	c.statusWrittenFrom.Delete(key)
	c.configMapsCreated.Delete(key)
}

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
