//go:build chaos && linux

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

package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/controller"
	"ydzs.io/book-controller/test/integration/framework"
)

// Admission (issue 27, item 4): the API server is up and answering, and
// something in its admission chain refuses, breaks or changes the
// controller's ConfigMaps. Each test confines what it registers to its own
// namespace (a namespace selector), and deletes it at cleanup even when it
// fails: the control plane is shared.

// configMapRules is a rule for creates and updates of ConfigMaps.
func configMapRules() admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}
}

// The messages of the policy in TestAdmissionPolicyDenies.
const (
	denyNameMessage  = "chaos policy: ConfigMaps named deny-* are not allowed in this namespace"
	denyTitleMessage = "chaos policy: a ConfigMap may not hold a FORBIDDEN title"
)

// TestAdmissionPolicyDenies puts a ValidatingAdmissionPolicy in the way:
// it denies ConfigMaps named deny-* and ConfigMaps whose title holds
// FORBIDDEN. The Books named deny-* are refused their ConfigMap's create;
// some Ready Books are then edited to a FORBIDDEN title, so their
// ConfigMap's update is refused. Every refused Book must say
// Ready=False ConfigMapAdmissionDenied with the policy's message, with one
// Warning event each; its attempts, counted in the audit log over a fixed
// window, stay within the backoff's bound; the other Books are Ready. Once
// the policy is deleted every Book converges by itself.
func TestAdmissionPolicyDenies(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	policies := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	name := "chaos-deny-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: configMapRules()}},
			},
			Validations: []admissionregistrationv1.Validation{
				{Expression: "!object.metadata.name.startsWith('deny-')", Message: denyNameMessage},
				{Expression: "!has(object.data) || !('title' in object.data) || !object.data['title'].contains('FORBIDDEN')",
					Message: denyTitleMessage},
			},
		},
	}
	if _, err := policies.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, "ValidatingAdmissionPolicy "+name, func(ctx context.Context) error {
		return policies.Delete(ctx, name, metav1.DeleteOptions{})
	})
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: namespaceSelector(ns)},
		},
	}
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, "ValidatingAdmissionPolicyBinding "+name, func(ctx context.Context) error {
		return bindings.Delete(ctx, name, metav1.DeleteOptions{})
	})
	faults.Add(1)
	took := probeUntil(t, ns, "deny-probe", "the policy to deny deny-probe", isRefusal(denyNameMessage))
	t.Logf("the policy denied a dry run %v after its binding was created", took.Round(time.Millisecond))

	addr := startRefusalController(t, ns)
	post422, put422 := restRequests(t, addr, "POST", "422"), restRequests(t, addr, "PUT", "422")
	start := time.Now()
	ok := createBooks(t, ns, "ok", 20)
	denied := createBooks(t, ns, "deny", 8)
	deniedNames := sortedNames(denied)
	refused := refusedAll(deniedNames, controller.ReasonConfigMapAdmissionDenied, denyNameMessage, name)
	waitRefused(t, ns, ok, refused)

	// Some Ready Books are edited to a title the policy denies: their
	// ConfigMaps keep the old spec.
	editedNames := sortedNames(ok)[:4]
	edited := time.Now()
	edits := updateSpecs(t, ns, editedNames, func(name string, old webappv2.BookSpec) spec {
		return spec{title: "FORBIDDEN title of " + name, price: old.Price.WholeUnits() + 1000}
	})
	stillOK := union(ok)
	for _, n := range editedNames {
		before := ok[n]
		refused[n] = refusal{reason: controller.ReasonConfigMapAdmissionDenied, message: []string{denyTitleMessage, name}, keeps: &before}
		delete(stillOK, n)
	}
	waitRefused(t, ns, stillOK, refused)
	time.Sleep(time.Until(edited.Add(refusalWindow)))

	writes := controllerWrites(t, ns)
	creates, createCodes := configMapAttempts(writes, ns, "create", deniedNames, start, refusalWindow)
	updates, updateCodes := configMapAttempts(writes, ns, "update", editedNames, edited, refusalWindow)
	nCreates, mostCreates := expectBoundedRetries(t, "denied creates", deniedNames, creates, createCodes, refusalWindow)
	nUpdates, mostUpdates := expectBoundedRetries(t, "denied updates", editedNames, updates, updateCodes, refusalWindow)
	refusedNames := append(slices.Clone(deniedNames), editedNames...)
	nWarnings := expectOneWarning(t, ns, refusedNames, controller.ReasonConfigMapAdmissionDenied)
	metric422 := restRequests(t, addr, "POST", "422") - post422 + restRequests(t, addr, "PUT", "422") - put422

	// The policy goes; the next retry of each Book succeeds.
	if err := bindings.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := policies.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	converged := waitConverged(t, ns, expectation{want: union(ok, denied, edits)})
	if converged > 2*refusalRecheck {
		t.Errorf("converged %v after the policy was deleted, want within %v (the retry interval is capped at %v)",
			converged.Round(time.Millisecond), 2*refusalRecheck, refusalRecheck)
	}
	expectOneWarning(t, ns, refusedNames, controller.ReasonConfigMapAdmissionDenied)
	figure(t, "ValidatingAdmissionPolicy denying %d creates and %d updates (20 other Books Ready): in %v, %d create attempts "+
		"(at most %d per Book, bound %d) answered %v, %d update attempts (at most %d per Book) answered %v; "+
		"metrics: %v requests answered 422; %d Warnings; converged %v after the policy's deletion",
		len(deniedNames), len(editedNames), refusalWindow, nCreates, mostCreates, maxAttempts(refusalWindow), createCodes,
		nUpdates, mostUpdates, updateCodes, metric422, nWarnings, converged.Round(10*time.Millisecond))
}

// webhookTimeout is the timeoutSeconds of the slow webhook; it answers
// slowHook later.
const (
	webhookTimeout = 1
	slowHook       = 3 * time.Second
)

// TestAdmissionWebhookTimesOut registers a validating webhook for the
// namespace's ConfigMaps, failurePolicy Fail and a timeout of one second,
// served by the test: it answers at once, except for ConfigMaps named
// slow-*, where it answers only after the API server has given up on it.
// The slow-* Books must say Ready=False ConfigMapAdmissionError naming the
// webhook, with one Warning event each, and their attempts (the webhook's
// own count of calls, and the audit log's of creates) stay within the
// backoff's bound; the other Books are Ready. Once the webhook
// configuration is deleted every Book converges.
func TestAdmissionWebhookTimesOut(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	waitRootCA(t, ns)
	user := controllerUser(t)
	srv := startWebhookServer(t, func(ctx context.Context, _ string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if !strings.HasPrefix(req.Name, "slow-") {
			return allowReview()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(slowHook):
			return allowReview()
		}
	})
	const hook = "slow.chaos.example.com"
	url, caBundle := srv.clientConfig("/validate")
	configs := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	name := "chaos-slow-" + ns
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    hook,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{configMapRules()},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			NamespaceSelector:       namespaceSelector(ns),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](webhookTimeout),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := configs.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, "ValidatingWebhookConfiguration "+name, func(ctx context.Context) error {
		return configs.Delete(ctx, name, metav1.DeleteOptions{})
	})
	faults.Add(1)
	took := probeUntil(t, ns, "slow-probe", "the webhook to time out on slow-probe", isRefusal("failed calling webhook"))
	t.Logf("the webhook timed out on a dry run %v after its configuration was created", took.Round(time.Millisecond))

	addr := startRefusalController(t, ns)
	post500 := restRequests(t, addr, "POST", "500")
	start := time.Now()
	ok := createBooks(t, ns, "ok", 20)
	slow := createBooks(t, ns, "slow", 3)
	slowNames := sortedNames(slow)
	waitRefused(t, ns, ok, refusedAll(slowNames, controller.ReasonConfigMapAdmissionError, hook))
	time.Sleep(time.Until(start.Add(refusalWindow)))

	calls := srv.callsBy(user, start, start.Add(refusalWindow))
	creates, codes := configMapAttempts(controllerWrites(t, ns), ns, "create", slowNames, start, refusalWindow)
	nCreates, most := expectBoundedRetries(t, "creates past the slow webhook", slowNames, creates, codes, refusalWindow)
	nCalls := 0
	for _, n := range slowNames {
		nCalls += calls[n]
		if calls[n] == 0 || calls[n] > maxAttempts(refusalWindow) {
			t.Errorf("the webhook was called %d times for %s in %v, want 1..%d", calls[n], n, refusalWindow, maxAttempts(refusalWindow))
		}
	}
	nWarnings := expectOneWarning(t, ns, slowNames, controller.ReasonConfigMapAdmissionError)
	metric500 := restRequests(t, addr, "POST", "500") - post500

	if err := configs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	converged := waitConverged(t, ns, expectation{want: union(ok, slow)})
	// An attempt in flight when the configuration goes may still wait out
	// the timeout.
	if bound := 2*refusalRecheck + webhookTimeout*time.Second; converged > bound {
		t.Errorf("converged %v after the webhook configuration was deleted, want within %v", converged.Round(time.Millisecond), bound)
	}
	expectOneWarning(t, ns, slowNames, controller.ReasonConfigMapAdmissionError)
	figure(t, "validating webhook timing out (%ds, failurePolicy Fail) on %d of 23 Books: in %v, %d webhook calls and %d create attempts "+
		"(at most %d per Book, bound %d) answered %v; metrics: %v POSTs answered 500; %d Warnings; converged %v after its deletion",
		webhookTimeout, len(slowNames), refusalWindow, nCalls, nCreates, most, maxAttempts(refusalWindow), codes, metric500,
		nWarnings, converged.Round(10*time.Millisecond))
}

// The labels the mutating webhook and the MutatingAdmissionPolicy add.
const (
	webhookLabel = "chaos.example.com/mutated-by-webhook"
	policyLabel  = "chaos.example.com/mutated-by-policy"
)

// TestAdmissionMutationNoFight changes every ConfigMap of the namespace on
// its way in: a mutating webhook served by the test adds a label, and so
// does a MutatingAdmissionPolicy when the API server serves them
// (admissionregistration.k8s.io/v1, asked through discovery). The
// controller tolerates labels others add, so there must be no fight:
// exactly one create per Book and no update, then no ConfigMap write at
// all when every Book is looked at again (nudge); and an edit of a Book
// afterwards is exactly one update of its ConfigMap, which the mutators
// change again, and none when it is looked at again.
func TestAdmissionMutationNoFight(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	waitRootCA(t, ns)
	user := controllerUser(t)
	srv := startWebhookServer(t, func(_ context.Context, _ string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return addLabel(req, webhookLabel)
	})
	url, caBundle := srv.clientConfig("/mutate")
	configs := env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	name := "chaos-label-" + ns
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "label.chaos.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules:                   []admissionregistrationv1.RuleWithOperations{configMapRules()},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			NamespaceSelector:       namespaceSelector(ns),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](5),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
	if _, err := configs.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, "MutatingWebhookConfiguration "+name, func(ctx context.Context) error {
		return configs.Delete(ctx, name, metav1.DeleteOptions{})
	})
	mutators := []string{"a mutating webhook"}
	labels := []string{webhookLabel}
	if servesMutatingAdmissionPolicy(t) {
		addLabelPolicy(t, name, ns)
		mutators = append(mutators, "a MutatingAdmissionPolicy")
		labels = append(labels, policyLabel)
	} else {
		t.Log("the API server serves no admissionregistration.k8s.io/v1 MutatingAdmissionPolicy; the webhook alone mutates")
	}
	faults.Add(1)
	probeUntil(t, ns, "mutation-probe", "the mutators to label a dry run", func(cm *corev1.ConfigMap, err error) error {
		if err != nil {
			return err
		}
		return missingLabels(cm, labels)
	})

	syncs := newSyncLog()
	addr := startRefusalControllerWatched(t, ns, syncs)
	start := time.Now()
	want := createBooks(t, ns, "book", 30)
	converged := waitConverged(t, ns, expectation{want: want})
	expectMutated(t, ns, sortedNames(want), labels)

	quiet := time.Now()
	reconciles0 := metricValue(t, addr, "book_controller_reconcile_total", "controller", controller.Name)
	// Every Book looked at again, its mutated ConfigMap in the cache: a
	// controller that fights the mutators writes now.
	nudge(t, syncs, ns, sortedNames(want))
	quietEnd := time.Now()
	reconciles := metricValue(t, addr, "book_controller_reconcile_total", "controller", controller.Name) - reconciles0
	writes := controllerWrites(t, ns)
	creates, updates, other := countConfigMapWrites(writes, ns, start, quiet)
	if creates != len(want) || updates != 0 || other != 0 {
		t.Errorf("until convergence: %d ConfigMap creates, %d updates, %d other writes; want %d creates and nothing else",
			creates, updates, other, len(want))
	}
	qCreates, qUpdates, qOther := countConfigMapWrites(writes, ns, quiet, quietEnd)
	qStatus := 0
	for _, w := range writes {
		if w.Resource == "books/status" && !w.At.Before(quiet) && w.At.Before(quietEnd) {
			qStatus++
		}
	}
	qCalls := srv.callsBy(user, quiet, quietEnd)
	if qCreates+qUpdates+qOther+qStatus != 0 || len(qCalls) != 0 {
		t.Errorf("in the %v after convergence: %d ConfigMap creates, %d updates, %d other ConfigMap writes, %d status writes, "+
			"webhook calls %v; want none: the controller fights the mutators", quietEnd.Sub(quiet).Round(time.Millisecond), qCreates, qUpdates, qOther, qStatus, qCalls)
	}

	// An edit is one update, which the mutators change again.
	editedNames := sortedNames(want)[:3]
	edited := time.Now()
	edits := updateSpecs(t, ns, editedNames, func(name string, old webappv2.BookSpec) spec {
		return spec{title: "Edited " + name, price: old.Price.WholeUnits() + 100}
	})
	editConverged := waitConverged(t, ns, expectation{want: union(want, edits)})
	nudge(t, syncs, ns, editedNames) // looked at again after the mutators changed the update
	expectMutated(t, ns, editedNames, labels)
	writes = controllerWrites(t, ns)
	perBook := map[string]int{}
	for _, w := range writes {
		if w.Resource == "configmaps" && !w.At.Before(edited) {
			perBook[strings.TrimPrefix(w.Object, ns+"/")+" "+w.Verb]++
		}
	}
	wantPerBook := map[string]int{}
	for _, n := range editedNames {
		wantPerBook[n+" update"] = 1
	}
	if !maps.Equal(perBook, wantPerBook) {
		t.Errorf("ConfigMap writes after editing %v: %v, want exactly one update each", editedNames, perBook)
	}
	eCalls := srv.callsBy(user, edited, time.Time{})
	figure(t, "%d Books under %s: %d ConfigMap creates, %d updates until converged (%v); "+
		"in %v after: %d ConfigMap writes, %d status writes, %v reconciles; %d edits afterwards: ConfigMap writes %v, webhook calls %v, converged %v",
		len(want), strings.Join(mutators, " and "), creates, updates, converged.Round(10*time.Millisecond), quietEnd.Sub(quiet).Round(time.Millisecond),
		qCreates+qUpdates+qOther, qStatus, reconciles, len(editedNames), perBook, eCalls, editConverged.Round(10*time.Millisecond))
}

// addLabel is a mutating webhook's answer that adds label=yes to a
// ConfigMap that lacks it, as a JSON patch.
func addLabel(req *admissionv1.AdmissionRequest, label string) *admissionv1.AdmissionResponse {
	var cm corev1.ConfigMap
	if err := json.Unmarshal(req.Object.Raw, &cm); err != nil {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "the test's webhook cannot decode the ConfigMap: " + err.Error()}}
	}
	if cm.Labels[label] == "yes" {
		return allowReview()
	}
	op := map[string]any{"op": "add", "path": "/metadata/labels/" + strings.ReplaceAll(label, "/", "~1"), "value": "yes"}
	if cm.Labels == nil {
		op = map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{label: "yes"}}
	}
	patch, err := json.Marshal([]any{op})
	if err != nil {
		panic(err)
	}
	resp := allowReview()
	resp.Patch, resp.PatchType = patch, ptr.To(admissionv1.PatchTypeJSONPatch)
	return resp
}

// servesMutatingAdmissionPolicy asks discovery whether the API server
// serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicies.
func servesMutatingAdmissionPolicy(t *testing.T) bool {
	t.Helper()
	list, err := env.Kube.Discovery().ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			return true
		}
	}
	return false
}

// addLabelPolicy creates a MutatingAdmissionPolicy that adds policyLabel to
// the ConfigMaps of ns, and its binding, both deleted at cleanup.
func addLabelPolicy(t *testing.T, name, ns string) {
	t.Helper()
	ctx := context.Background()
	policies := env.Kube.AdmissionregistrationV1().MutatingAdmissionPolicies()
	bindings := env.Kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: configMapRules()}},
			},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{
					Expression: fmt.Sprintf(`Object{metadata: Object.metadata{labels: {%q: "yes"}}}`, policyLabel),
				},
			}},
		},
	}
	if _, err := policies.Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, "MutatingAdmissionPolicy "+name, func(ctx context.Context) error {
		return policies.Delete(ctx, name, metav1.DeleteOptions{})
	})
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName:     name,
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: namespaceSelector(ns)},
		},
	}
	if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deleteAtCleanup(t, "MutatingAdmissionPolicyBinding "+name, func(ctx context.Context) error {
		return bindings.Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// missingLabels says which of labels cm lacks (with value yes), or nil.
func missingLabels(cm *corev1.ConfigMap, labels []string) error {
	var missing []string
	for _, l := range labels {
		if cm.Labels[l] != "yes" {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("ConfigMap %s lacks %v: labels %v", cm.Name, missing, cm.Labels)
	}
	return nil
}

// expectMutated checks that the ConfigMap of each named Book carries the
// mutators' labels besides the controller's own.
func expectMutated(t *testing.T, ns string, books []string, labels []string) {
	t.Helper()
	for _, n := range books {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := missingLabels(cm, labels); err != nil {
			t.Error(err)
		}
		if cm.Labels[controller.ManagedByLabel] != controller.ManagedByValue {
			t.Errorf("ConfigMap %s lost the controller's label: %v", n, cm.Labels)
		}
	}
}

// countConfigMapWrites counts the controller's ConfigMap writes in ns
// received in [from, to).
func countConfigMapWrites(writes []framework.AuditWrite, ns string, from, to time.Time) (creates, updates, other int) {
	for _, w := range writes {
		if w.Resource != "configmaps" || !strings.HasPrefix(w.Object, ns+"/") || w.At.Before(from) || !w.At.Before(to) {
			continue
		}
		switch w.Verb {
		case "create":
			creates++
		case "update":
			updates++
		default:
			other++
		}
	}
	return creates, updates, other
}
