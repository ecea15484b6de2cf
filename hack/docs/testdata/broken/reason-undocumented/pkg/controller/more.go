package controller

// ReasonConfigMapNew is new and undocumented.
const ReasonConfigMapNew = "ConfigMapNew"
