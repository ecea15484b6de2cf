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

package manager

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"ydzs.io/book-controller/pkg/webhook"
)

// webhookOnlySteps are Run's steps with --webhook-only: the conversion
// webhook, its certificates, /metrics and the probes, and nothing that
// lists, caches or writes Books. It is the Deployment that keeps conversion
// available while the controller's Deployment runs a build that serves
// none, as after a rollback to v0.9.0 with the two-version CRD installed:
// the API server then needs the webhook for every v1 request, the old
// controller's list and watch among them (docs/api-versions.md).
func (m *manager) webhookOnlySteps() []step {
	return []step{
		{"connect", m.connect},                       // clients
		{"serve the webhook", m.serveTheWebhookOnly}, // or say why it cannot
		{"serve endpoints", m.serveEndpoints},        // /metrics, /healthz, /readyz
		{"serve until stopped", m.serveUntilStopped}, // no work: the webhook is the work
	}
}

// serveTheWebhookOnly serves the webhook, and fails when it would not: a
// process that runs nothing else must not look ready while serving nothing.
func (m *manager) serveTheWebhookOnly(ctx context.Context) error {
	if err := m.serveWebhook(ctx); err != nil {
		return err
	}
	if m.webhookServer == nil {
		return fmt.Errorf("--webhook-only: the CRD %s does not convert through a webhook (or cannot be read; -v=2 says which): install manifests/crd.yaml first, or drop --webhook-only", webhook.DefaultCRDName)
	}
	return nil
}

// serveUntilStopped returns when ctx ends; the servers stop with Run.
func (m *manager) serveUntilStopped(ctx context.Context) error {
	klog.FromContext(ctx).Info("Serving only the conversion webhook", "address", m.webhookServer.Addr().String())
	<-ctx.Done()
	return nil
}
