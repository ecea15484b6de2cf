package controller

// Reasons of the Ready condition; syncBook (below) writes them.
const (
	ReasonConfigMapReady    = "ConfigMapReady"
	ReasonConfigMapConflict = "ConfigMapConflict"
)

// EventConfigMapCreated is an event reason.
const EventConfigMapCreated = "ConfigMapCreated"

func syncBook() string { return ReasonConfigMapReady }
