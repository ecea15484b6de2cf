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

// Package soak is make test-soak: two replicas of the built controller,
// leader election on, every namespace watched, over thousands of Books for
// DURATION under continuous churn (edits, deletes and recreates, ConfigMaps
// tampered with and deleted, whole namespaces deleted and recreated) and
// faults (kube-apiserver restarted, the leader SIGKILLed). Every 5 s it
// scrapes each replica's heap, goroutines, open FDs and queue depth. The
// soak itself is soak_test.go (build tag soak); its judgement, analysis.go,
// is pure and unit-tested by make test. The chart is drawn by
// test/soak/chart, a module of its own. docs/operations.md#soak has the
// limits and the figures of a run.
package soak
