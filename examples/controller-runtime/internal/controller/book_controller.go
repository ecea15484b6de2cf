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

// Package controller is the controller-runtime twin of ydzs.io/book-controller/pkg/controller:
// the same Book behaviour, written the way kubebuilder scaffolds a controller.
// docs/controller-runtime.md in the repository compares the two piece by piece.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// The names below are part of the Book controller's contract (labels, data
// keys, condition and event reasons). They are spelled out here rather than
// imported from pkg/controller so that the parity test in
// test/integration/parity catches any drift between the two implementations.
const (
	// ManagedByLabel and ManagedByValue mark the ConfigMaps a Book owns.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "book-controller"
	// BookLabel names the Book a ConfigMap belongs to.
	BookLabel = webappv2.GroupName + "/book"

	// The ConfigMap data keys (configMapData).
	TitleKey    = "title"
	PriceKey    = "price"
	AmountKey   = "amount"
	CurrencyKey = "currency"
	AuthorsKey  = "authors"

	// ConditionReady is the Book's only condition type.
	ConditionReady = "Ready"
	// ReasonConfigMapReady, ReasonConfigMapConflict and
	// ReasonConfigMapOfEarlierBook are its reasons.
	ReasonConfigMapReady         = "ConfigMapReady"
	ReasonConfigMapConflict      = "ConfigMapConflict"
	ReasonConfigMapOfEarlierBook = "ConfigMapOfEarlierBook"

	// Event reasons.
	EventConfigMapCreated  = "ConfigMapCreated"
	EventConfigMapUpdated  = "ConfigMapUpdated"
	EventConfigMapConflict = ReasonConfigMapConflict

	// ReportingController is the events.k8s.io reportingController; pass it
	// to mgr.GetEventRecorder.
	ReportingController = "webapp.ydzs.io/book-controller"

	// DefaultConflictRecheck is how often a Book whose ConfigMap name is taken
	// by somebody else's ConfigMap is looked at again.
	DefaultConflictRecheck = 30 * time.Second
)

// errNotControlled stops CreateOrUpdate before it modifies a ConfigMap the
// Book does not control.
var errNotControlled = errors.New("ConfigMap is not controlled by this Book")

// BookReconciler reconciles a Book object.
type BookReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder

	// ConflictRecheck is the RequeueAfter of a Book in conflict; zero means
	// DefaultConflictRecheck.
	ConflictRecheck time.Duration

	// LiveReader, when set, is asked for a ConfigMap the cache does not
	// have but whose create the API server refused as AlreadyExists. Set it
	// (to mgr.GetAPIReader()) when the cache holds only labelled ConfigMaps:
	// a ConfigMap without our label, somebody else's or ours with the label
	// removed, is then invisible to the cached client.
	LiveReader client.Reader

	// StatusMergePatch writes the status with a JSON merge patch of the
	// changed fields instead of an Update. A patch carries no
	// resourceVersion, so a status computed from a cache that lags our own
	// last write is not refused with 409 Conflict; the kubebuilder scaffold's
	// Status().Update is (and is then retried with backoff).
	StatusMergePatch bool

	// GenerationChangedOnly filters Book updates through
	// predicate.GenerationChangedPredicate: an update that leaves
	// metadata.generation as it was (a status write, our own included, or a
	// label change) reconciles nothing. It is controller-runtime's way to
	// skip the echo of the status it writes; book-controller skips exactly
	// its own writes' echoes instead (pkg/controller ownWrites.IsEcho).
	GenerationChangedOnly bool
}

// +kubebuilder:rbac:groups=webapp.ydzs.io,resources=books,verbs=get;list;watch
// +kubebuilder:rbac:groups=webapp.ydzs.io,resources=books/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile makes a Book's ConfigMap hold its spec and reports the outcome in
// the Book's status.
func (r *BookReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	book := &webappv2.Book{}
	if err := r.Get(ctx, req.NamespacedName, book); err != nil {
		// A deleted Book needs nothing from us: the garbage collector removes
		// its ConfigMap through the owner reference.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !book.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	ready, result, err := r.reconcileConfigMap(ctx, book)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.updateStatus(ctx, book, ready); err != nil {
		return ctrl.Result{}, err
	}
	log.V(1).Info("Reconciled", "reason", ready.Reason)
	return result, nil
}

// reconcileConfigMap creates or repairs the Book's ConfigMap and returns the
// Ready condition that results. A ConfigMap of the same name that the Book
// does not control is left alone and looked at again after ConflictRecheck.
func (r *BookReconciler) reconcileConfigMap(ctx context.Context, book *webappv2.Book) (metav1.Condition, ctrl.Result, error) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: book.Name, Namespace: book.Namespace}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, cm, desiredConfigMap(book, cm, r.Scheme))
	if apierrors.IsAlreadyExists(err) && r.LiveReader != nil {
		// Not in the (label-filtered) cache, yet it exists: decide on what
		// the API server holds.
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: book.Name, Namespace: book.Namespace}}
		op, err = controllerutil.CreateOrUpdate(ctx, liveReads{Client: r.Client, reader: r.LiveReader}, cm,
			desiredConfigMap(book, cm, r.Scheme))
	}
	switch {
	case errors.Is(err, errNotControlled):
		recheck := r.ConflictRecheck
		if recheck <= 0 {
			recheck = DefaultConflictRecheck
		}
		if controlledByEarlierBook(cm, book) {
			// Not a conflict: the garbage collector is on its way, and the
			// ConfigMap's delete event (Owns maps it to the Book by name,
			// whatever the UID) brings the Book back.
			return earlierBookCondition(book, cm), ctrl.Result{RequeueAfter: recheck}, nil
		}
		return conflictCondition(book), ctrl.Result{RequeueAfter: recheck}, nil
	case err != nil:
		return metav1.Condition{}, ctrl.Result{}, err
	}

	switch op {
	case controllerutil.OperationResultCreated:
		r.Recorder.Eventf(book, cm, corev1.EventTypeNormal, EventConfigMapCreated, "Create",
			"Created ConfigMap %s", cm.Name)
	case controllerutil.OperationResultUpdated:
		r.Recorder.Eventf(book, cm, corev1.EventTypeNormal, EventConfigMapUpdated, "Update",
			"Updated ConfigMap %s to match the spec", cm.Name)
	}
	return readyCondition(book), ctrl.Result{}, nil
}

// desiredConfigMap is CreateOrUpdate's mutate function for cm, the Book's
// ConfigMap as read (or a new one).
func desiredConfigMap(book *webappv2.Book, cm *corev1.ConfigMap, scheme *runtime.Scheme) controllerutil.MutateFn {
	return func() error {
		if !cm.CreationTimestamp.IsZero() && !metav1.IsControlledBy(cm, book) {
			return errNotControlled
		}
		if cm.DeletionTimestamp != nil {
			// Its delete event brings us back to recreate it.
			return fmt.Errorf("ConfigMap %s/%s is being deleted; will recreate it", cm.Namespace, cm.Name)
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[ManagedByLabel] = ManagedByValue
		cm.Labels[BookLabel] = book.Name
		cm.Data = configMapData(&book.Spec)
		cm.BinaryData = nil
		return controllerutil.SetControllerReference(book, cm, scheme)
	}
}

// configMapData is the ConfigMap's data, the contract ours keeps
// (docs/behaviour.md): v1's title and whole price for every Book; the
// amount and currency when the whole price does not say the price exactly;
// the authors, as a JSON array, when there are some.
func configMapData(spec *webappv2.BookSpec) map[string]string {
	data := map[string]string{
		TitleKey: spec.Title,
		PriceKey: strconv.FormatInt(int64(spec.Price.WholeUnits()), 10),
	}
	if !spec.Price.IsWholeUnits() {
		data[AmountKey], data[CurrencyKey] = spec.Price.Amount, spec.Price.Currency
	}
	if len(spec.Authors) > 0 {
		authors, _ := json.Marshal(spec.Authors) // strings always marshal
		data[AuthorsKey] = string(authors)
	}
	return data
}

// controlledByEarlierBook reports whether cm, as CreateOrUpdate read it, is
// controlled by a Book of book's name but another UID: a Book deleted before
// book was created with its name, or a forged reference. The garbage
// collector looks owners up by UID, so it deletes such a ConfigMap.
func controlledByEarlierBook(cm *corev1.ConfigMap, book *webappv2.Book) bool {
	ref := metav1.GetControllerOfNoCopy(cm)
	if ref == nil || ref.Kind != "Book" || ref.Name != book.Name || ref.UID == book.UID {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == webappv2.GroupName
}

// liveReads is a client whose Get goes to the API server.
type liveReads struct {
	client.Client
	reader client.Reader
}

// Get reads obj from the API server, not the cache.
func (l liveReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.reader.Get(ctx, key, obj, opts...)
}

// updateStatus writes the Book's status when it changed, and warns once when
// the Book enters a conflict (not on every recheck while it lasts).
func (r *BookReconciler) updateStatus(ctx context.Context, book *webappv2.Book, ready metav1.Condition) error {
	prev := meta.FindStatusCondition(book.Status.Conditions, ConditionReady)
	wasConflict := prev != nil && prev.Reason == ReasonConfigMapConflict

	status := book.Status.DeepCopy()
	status.ObservedGeneration = book.Generation
	status.ConfigMapName = book.Name
	// The API server keeps seconds; rounding keeps an unchanged status equal
	// to what the cache returns, so nothing is written.
	ready.LastTransitionTime = metav1.Now().Rfc3339Copy()
	meta.SetStatusCondition(&status.Conditions, ready)
	if equality.Semantic.DeepEqual(book.Status, *status) {
		return nil
	}

	if err := r.writeStatus(ctx, book, *status); err != nil {
		return err
	}
	if ready.Reason == ReasonConfigMapConflict && !wasConflict {
		r.Recorder.Eventf(book, nil, corev1.EventTypeWarning, EventConfigMapConflict, "Sync", "%s", ready.Message)
	}
	return nil
}

// writeStatus sets book's status and sends it: Status().Update as the
// scaffold does, or a merge patch with StatusMergePatch.
func (r *BookReconciler) writeStatus(ctx context.Context, book *webappv2.Book, status webappv2.BookStatus) error {
	if !r.StatusMergePatch {
		book.Status = status
		return r.Status().Update(ctx, book)
	}
	patch := client.MergeFrom(book.DeepCopy())
	book.Status = status
	return r.Status().Patch(ctx, book, patch)
}

func readyCondition(book *webappv2.Book) metav1.Condition {
	return metav1.Condition{
		Type:               ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             ReasonConfigMapReady,
		Message:            fmt.Sprintf("ConfigMap %s holds the current spec", book.Name),
		ObservedGeneration: book.Generation,
	}
}

func conflictCondition(book *webappv2.Book) metav1.Condition {
	return metav1.Condition{
		Type:   ConditionReady,
		Status: metav1.ConditionFalse,
		Reason: ReasonConfigMapConflict,
		Message: fmt.Sprintf("ConfigMap %s exists and is not controlled by this Book; "+
			"delete or rename it to let the controller create its own", book.Name),
		ObservedGeneration: book.Generation,
	}
}

func earlierBookCondition(book *webappv2.Book, cm *corev1.ConfigMap) metav1.Condition {
	return metav1.Condition{
		Type:   ConditionReady,
		Status: metav1.ConditionFalse,
		Reason: ReasonConfigMapOfEarlierBook,
		Message: fmt.Sprintf("ConfigMap %s belongs to an earlier Book %s (UID %s) that no longer exists; "+
			"waiting for the garbage collector to delete it", cm.Name, book.Name, metav1.GetControllerOfNoCopy(cm).UID),
		ObservedGeneration: book.Generation,
	}
}

// SetupWithManager sets up the controller with the Manager: Books are
// reconciled, and events on the ConfigMaps they control enqueue their Book.
func (r *BookReconciler) SetupWithManager(mgr ctrl.Manager) error {
	var opts []builder.ForOption
	if r.GenerationChangedOnly {
		opts = append(opts, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&webappv2.Book{}, opts...).
		Owns(&corev1.ConfigMap{}).
		Named("book").
		Complete(r)
}
