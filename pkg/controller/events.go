package controller

// Event reasons. They are part of the controller's interface: users filter
// on them (`kubectl events --for book/NAME`) and alerting may too.
const (
	EventConfigMapCreated = "ConfigMapCreated"
	EventConfigMapUpdated = "ConfigMapUpdated"
	// Warnings carry the Ready reason they announce (status.go,
	// warningReasons): ConfigMapConflict, ConfigMapQuotaExceeded,
	// ConfigMapAdmissionDenied, ConfigMapAdmissionError, ConfigMapForbidden.
	EventConfigMapConflict = ReasonConfigMapConflict
)

// ReportingController is the events.k8s.io reportingController of our events.
const ReportingController = "webapp.ydzs.io/book-controller"
