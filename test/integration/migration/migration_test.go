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

package migration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	svmv1 "k8s.io/api/storagemigration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/manager"
	"ydzs.io/book-controller/pkg/migration"
	"ydzs.io/book-controller/pkg/webhook"
	"ydzs.io/book-controller/test/integration/framework"
)

const group = "migration.test.ydzs.io"

// migrationTimeout bounds a migration: kube-controller-manager's garbage
// collector finds a new resource type within 30 s (its discovery period),
// and the migrator waits for it up to a minute; then 2,000 patches.
const migrationTimeout = 4 * time.Minute

// thingCRD is a CRD of plural/kind with v1 (the storage version) and v2,
// of the same schema, converted by the API server alone (strategy None).
func thingCRD(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		},
	}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List",
				Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema},
				{Name: "v2", Served: true, Storage: false, Schema: schema},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
}

// installCRD creates the CRD and waits until it is Established.
func installCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	crds := env.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, crd.Name+" to be Established", func(ctx context.Context) error {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	// The garbage collector, whose caches the storage version migrator
	// rewrites from, looks for new resource types every 30 s; started
	// after the CRD, it watches them from the start.
	if err := env.Cluster.KillControllerManager(); err != nil {
		t.Fatal(err)
	}
	if err := env.Cluster.StartControllerManager(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// switchStorage makes v2 the storage version and waits until
// storedVersions lists both.
func switchStorage(t *testing.T, name string) {
	t.Helper()
	crds := env.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
		_, err = crds.Update(t.Context(), crd, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStored(t, name, []string{"v1", "v2"}, framework.Timeout)
}

func waitStored(t *testing.T, name string, want []string, timeout time.Duration) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("%s's storedVersions to be %v", name, want), framework.PollInterval, timeout,
		env.StoredVersionsAre(name, want...))
}

// createObjects creates n objects of plural in ns as v1, labelled with
// labels if not nil, and returns how long it took.
func createObjects(t *testing.T, plural, kind, ns string, n int, labels func(i int) map[string]string) time.Duration {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(env.RESTConfig())
	res := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}).Namespace(ns)
	start := time.Now()
	framework.Parallel(t, n, 16, func(ctx context.Context, i int) error {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": kind,
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%05d", strings.ToLower(kind), i)},
			"spec":     map[string]any{"index": int64(i)},
		}}
		if labels != nil {
			obj.SetLabels(labels(i))
		}
		_, err := res.Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
	return time.Since(start)
}

// storedAs counts the objects of plural in ns by the apiVersion etcd holds
// them in.
func storedAs(t *testing.T, plural, ns string) map[string]int {
	t.Helper()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{env.Cluster.EtcdURL()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	prefix := "/registry/" + group + "/" + plural + "/" + ns + "/"
	resp, err := etcd.Get(t.Context(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, kv := range resp.Kvs {
		var obj struct {
			APIVersion string `json:"apiVersion"`
		}
		if err := json.Unmarshal(kv.Value, &obj); err != nil {
			t.Fatalf("etcd key %s: %v", kv.Key, err)
		}
		counts[obj.APIVersion]++
	}
	return counts
}

// startMigrator runs a Migrator of the CRD name until the test ends, with
// metrics in a registry of its own, which it returns.
func startMigrator(t *testing.T, name string) *prometheus.Registry {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: env.Kube.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := migration.New(migration.Config{CRDName: name, Extensions: env.Extensions, Kube: env.Kube,
		Recorder: broadcaster.NewRecorder(scheme, "book-controller-test"), Metrics: migration.NewMetrics(reg),
		// No second attempt within a test.
		FirstRetry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		broadcaster.Shutdown()
	})
	return reg
}

// gauge is the value of the gauge name in reg, or -1 when it has none.
func gauge(reg *prometheus.Registry, name string) float64 {
	families, err := reg.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// crdEvents are the notes of the Events regarding the CRD name, by reason.
func crdEvents(ctx context.Context, name string) (map[string][]string, error) {
	list, err := env.Kube.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range list.Items {
		if e.Regarding.Kind == "CustomResourceDefinition" && e.Regarding.Name == name {
			out[e.Reason] = append(out[e.Reason], e.Note)
		}
	}
	return out, nil
}

func ourMigrations(ctx context.Context, resource string) ([]svmv1.StorageVersionMigration, error) {
	list, err := env.Kube.StoragemigrationV1().StorageVersionMigrations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []svmv1.StorageVersionMigration
	for _, s := range list.Items {
		if s.Spec.Resource.Group == group && s.Spec.Resource.Resource == resource {
			out = append(out, s)
		}
	}
	return out, nil
}

// TestMigration creates 2,000 objects while v1 is the storage version,
// makes v2 the storage version, and wants the Migrator to have every
// object rewritten as v2 in etcd and storedVersions set to [v2], with
// Events on the CRD saying so.
func TestMigration(t *testing.T) {
	const n = 2000
	crd := thingCRD("things", "Thing")
	installCRD(t, crd)
	ns := env.Namespace(t)
	took := createObjects(t, "things", "Thing", ns, n, nil)
	t.Logf("created %d objects as v1 in %v", n, took.Round(time.Millisecond))
	if got := storedAs(t, "things", ns); got[group+"/v1"] != n {
		t.Fatalf("etcd holds %v, want %d as v1", got, n)
	}
	switchStorage(t, crd.Name)

	start := time.Now()
	reg := startMigrator(t, crd.Name)
	waitStored(t, crd.Name, []string{"v2"}, migrationTimeout)
	total := time.Since(start)
	if got := storedAs(t, "things", ns); got[group+"/v2"] != n || len(got) != 1 {
		t.Errorf("etcd holds %v, want all %d as v2", got, n)
	}
	svms, err := ourMigrations(t.Context(), "things")
	if err != nil || len(svms) != 1 {
		t.Fatalf("migrations of things: %d (%v), want 1", len(svms), err)
	}
	svm := svms[0]
	if want := migration.Name(crd.Name, "v2", 2); svm.Name != want {
		t.Errorf("migration named %s, want %s", svm.Name, want)
	}
	ok := meta.FindStatusCondition(svm.Status.Conditions, string(svmv1.MigrationSucceeded))
	if ok == nil || ok.Status != metav1.ConditionTrue {
		t.Fatalf("migration %s conditions %+v, want Succeeded", svm.Name, svm.Status.Conditions)
	}
	t.Logf("migrated %d objects: storedVersions [v2] %v after the Migrator started; the StorageVersionMigration ran %v from creation to Succeeded (%s)",
		n, total.Round(time.Millisecond), ok.LastTransitionTime.Sub(svm.CreationTimestamp.Time), ok.Message)
	framework.Eventually(t, "the Events on "+crd.Name, func(ctx context.Context) error {
		got, err := crdEvents(ctx, crd.Name)
		if err == nil && (len(got[migration.EventMigrationStarted]) == 0 || len(got[migration.EventMigrationSucceeded]) == 0) {
			err = fmt.Errorf("events %v", got)
		}
		return err
	})
	framework.Eventually(t, "the stored versions gauge at 1", func(context.Context) error {
		if g := gauge(reg, "book_controller_crd_stored_versions"); g != 1 {
			return fmt.Errorf("gauge %v", g)
		}
		return nil
	})
}

// TestNothingToMigrate: storedVersions already holds the storage version
// alone, and the Migrator creates no migration.
func TestNothingToMigrate(t *testing.T) {
	crd := thingCRD("gadgets", "Gadget")
	installCRD(t, crd)
	reg := startMigrator(t, crd.Name)
	// The gauge is set once a sync is over, writes included: the marker
	// after which a migration would exist.
	framework.Eventually(t, "the Migrator's first sync", func(context.Context) error {
		if g := gauge(reg, "book_controller_crd_stored_versions"); g != 1 {
			return fmt.Errorf("gauge %v", g)
		}
		return nil
	})
	svms, err := ourMigrations(t.Context(), "gadgets")
	if err != nil || len(svms) != 0 {
		t.Errorf("migrations of gadgets: %d (%v), want none", len(svms), err)
	}
}

// TestFailedMigration: an admission policy refuses any update of a frozen
// Widget, so the migrator's rewrite of it fails; storedVersions must keep
// v1 (objects are still stored as v1), and an Event must say why.
func TestFailedMigration(t *testing.T) {
	crd := thingCRD("widgets", "Widget")
	installCRD(t, crd)
	ns := env.Namespace(t)
	createObjects(t, "widgets", "Widget", ns, 10, func(i int) map[string]string {
		if i == 5 {
			return map[string]string{"frozen": "true"}
		}
		return nil
	})
	freeze(t, ns)
	switchStorage(t, crd.Name)
	startMigrator(t, crd.Name)

	name := migration.Name(crd.Name, "v2", 2)
	poll.Eventually(t, "the migration "+name+" to fail and kube-controller-manager to finish with it",
		framework.PollInterval, migrationTimeout, func(ctx context.Context) error {
			svm, err := env.Kube.StoragemigrationV1().StorageVersionMigrations().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationFailed)) ||
				!meta.IsStatusConditionFalse(svm.Status.Conditions, string(svmv1.MigrationRunning)) {
				return fmt.Errorf("conditions %+v", svm.Status.Conditions)
			}
			t.Logf("migration failed: %s", meta.FindStatusCondition(svm.Status.Conditions, string(svmv1.MigrationFailed)).Message)
			return nil
		})
	waitStored(t, crd.Name, []string{"v1", "v2"}, framework.Timeout)
	var notes map[string][]string
	framework.Eventually(t, "a StorageMigrationFailed Event on "+crd.Name, func(ctx context.Context) error {
		var err error
		notes, err = crdEvents(ctx, crd.Name)
		if err == nil && len(notes[migration.EventMigrationFailed]) == 0 {
			err = fmt.Errorf("events %v", notes)
		}
		return err
	})
	if note := notes[migration.EventMigrationFailed][0]; !strings.Contains(note, "frozen widgets cannot be updated") {
		t.Errorf("the Event says %q, want the policy's message", note)
	}
	// kube-controller-manager 1.37 sets storedVersions to the storage
	// version when a migration ends, failed or not; the Migrator puts v1
	// back. Log which happened.
	t.Logf("StoredVersionsRestored Events: %q", notes[migration.EventStoredRestored])
	if got := storedAs(t, "widgets", ns); got[group+"/v1"] == 0 {
		t.Errorf("etcd holds %v, want the frozen Widget still as v1", got)
	}
}

// freeze installs an admission policy that refuses updates of Widgets
// labelled frozen, and waits until it is in force.
func freeze(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "freeze-widgets"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"},
						Resources: []string{"widgets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.metadata.labels) || !('frozen' in object.metadata.labels)",
				Message:    "frozen widgets cannot be updated",
			}},
		},
	}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "freeze-widgets"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	if _, err := env.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.RESTConfig())
	res := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns)
	framework.Eventually(t, "the policy to refuse updates of the frozen Widget", func(ctx context.Context) error {
		obj, err := res.Get(ctx, "widget-00005", metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj.SetAnnotations(map[string]string{"probe": time.Now().String()})
		if _, err := res.Update(ctx, obj, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "frozen widgets") {
			return fmt.Errorf("update: %v", err)
		}
		return nil
	})
}

// TestControllerMigratesTheBookCRD upgrades as a user does: Books created as
// v1 under the v1-only CRD of the releases before v2 (framework.V1OnlyCRD),
// then manifests/crd.yaml applied, then the controller started as its
// ServiceAccount (the roles of manifests/, storage_migration_role.yaml and
// the webhook's included), with leader election, --storage-migration and
// its webhook on 127.0.0.1. It must convert the v1-stored Books for its own
// v2 informer, make them Ready, and have storedVersions set to [v2], as
// Events on the CRD and its metrics say.
func TestControllerMigratesTheBookCRD(t *testing.T) {
	v1, err := framework.V1OnlyCRD()
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, v1)
	ns := env.Namespace(t)
	const books = 20
	v1Books := make([]*webappv1.Book, books)
	for i := range v1Books {
		v1Books[i] = &webappv1.Book{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: framework.BookName("book", i)},
			Spec: webappv1.BookSpec{Title: fmt.Sprintf("Book %d", i), Price: int32(i)}}
	}
	env.CreateAllV1(t, v1Books)

	start := time.Now()
	env.SwitchCRD(t, framework.CRDFile)
	const controllerNS = "book-controller-system"
	cfg := env.ControllerServiceAccountConfig(t)
	env.WaitForAccess(t, cfg,
		authorizationv1.ResourceAttributes{Verb: "update", Resource: "secrets", Namespace: controllerNS, Name: webhook.DefaultSecretName},
		authorizationv1.ResourceAttributes{Verb: "watch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: webhook.DefaultCRDName},
		authorizationv1.ResourceAttributes{Verb: "patch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: webhook.DefaultCRDName})
	metrics, probe := framework.FreeAddr(t), framework.FreeAddr(t)
	env.StartController(t, framework.ControllerOptions{StorageMigration: true, MetricsAddr: metrics, ProbeAddr: probe, RESTConfig: cfg,
		LeaderElection: manager.LeaderElection{Enabled: true, Namespace: controllerNS, ID: "book-controller"},
		Webhook:        manager.Webhook{Addr: "127.0.0.1:0", Loopback: true, Namespace: controllerNS}})
	framework.Eventually(t, "a v2 read of a v1-stored Book, converted by the controller's webhook", func(ctx context.Context) error {
		b, err := env.Books.WebappV2().Books(ns).Get(ctx, "book-00000", metav1.GetOptions{})
		if err == nil && (b.Spec.Price.Currency != "XXX" || b.Spec.Price.Amount == "") {
			err = fmt.Errorf("price %+v, want an amount in XXX", b.Spec.Price)
		}
		return err
	})
	t.Logf("the webhook converted %v after crd.yaml was applied", time.Since(start).Round(time.Millisecond))
	env.WaitForBooksReady(t, ns, books)
	waitStored(t, v1.Name, []string{"v2"}, migrationTimeout)
	t.Logf("storedVersions [v2] %v after crd.yaml was applied", time.Since(start).Round(time.Millisecond))
	// A Book v1 cannot express, which the controller reads and writes as v1.
	priced := &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: "priced"},
		Spec: webappv2.BookSpec{Title: "t", Price: webappv2.Price{Amount: "19.99", Currency: "EUR"}}}
	if _, err := env.Books.WebappV2().Books(ns).Create(t.Context(), priced, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForBooksReady(t, ns, books+1)
	framework.Eventually(t, "/readyz", func(context.Context) error {
		code, body, err := framework.HTTPGet(probe, "/readyz")
		if err == nil && code != 200 {
			err = fmt.Errorf("%d %s", code, body)
		}
		return err
	})
	framework.Eventually(t, "the Events on "+v1.Name, func(ctx context.Context) error {
		got, err := crdEvents(ctx, v1.Name)
		if err == nil && (len(got[migration.EventMigrationStarted]) == 0 || len(got[migration.EventMigrationSucceeded]) == 0) {
			err = fmt.Errorf("events %v", got)
		}
		return err
	})
	framework.Eventually(t, "the migration metrics", func(context.Context) error {
		code, body, err := framework.HTTPGet(metrics, "/metrics")
		if err != nil || code != 200 {
			return fmt.Errorf("GET /metrics: %d %v", code, err)
		}
		for _, want := range []string{`book_controller_storage_migrations_total{result="started"} 1`,
			`book_controller_storage_migrations_total{result="succeeded"} 1`, "book_controller_crd_stored_versions 1",
			"book_controller_storage_migration_running 0"} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("no %q in /metrics", want)
			}
		}
		return nil
	})
}
