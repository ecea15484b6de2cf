// Package framework is what the integration tests share: one local control
// plane per test package, the Book CRD installed through the apiextensions
// clientset, namespaces per test, the controller started in-process, and
// waits on the state of the cluster.
package framework
