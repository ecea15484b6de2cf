package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// Event reasons. They are part of the controller's interface: users filter
// on them (`kubectl events --for book/NAME`) and alerting may too.
const (
	EventConfigMapCreated  = "ConfigMapCreated"
	EventConfigMapUpdated  = "ConfigMapUpdated"
	EventConfigMapConflict = ReasonConfigMapConflict
)

// ReportingController is the events.k8s.io reportingController of our events.
const ReportingController = "webapp.ydzs.io/book-controller"

// NewEventRecorder starts an events.k8s.io/v1 broadcaster that sends to the
// API server until ctx ends, and returns a recorder for Books. The recorder
// resolves object references through a scheme that knows both core types and
// Book, kept private rather than registered in client-go's global scheme.
func NewEventRecorder(ctx context.Context, kubeClient kubernetes.Interface) (events.EventRecorder, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	if err := webappv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building event scheme: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubeClient.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("starting event broadcaster: %w", err)
	}
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(scheme, ReportingController), nil
}
