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

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/test/integration/framework"
)

// The v1-backlog phase is the figure v2 is held to: the backlog phase of the
// last release that knew only v1 (framework.LastV1Release, built from git),
// under its v1-only CRD, with Books created and watched as v1, so that no
// conversion happens anywhere. ours-backlog is this build under the
// two-version CRD, where the API server's v1 watch cache converts every
// Book written through the webhook: the price of v2 as a cluster pays it.
//
// The two CRDs cannot both be installed, so the unit swaps them, deleting
// one and creating the other (no Book is left at that point). A new CRD gets
// a new storage and cold watch caches, which the first phase after the
// swap would pay for (run's warm-up explains why): an unmeasured backlog
// run warms the v1-only CRD before the measured one, and the load
// generator warms the two-version CRD after the swap back, as it does at
// the start.

// v1Phase names the phase in -phases, the JSON and the bars, and v1Release
// the release it runs.
const (
	v1Phase   = "v1-backlog"
	v1Release = framework.LastV1Release
	// v2OnlyPhase is ours under a CRD without v1: what serving v1 costs.
	v2OnlyPhase = "v2-only-backlog"
)

// buildV1 builds framework.LastV1Release's controller when the v1-backlog
// phase is selected.
func (e *env) buildV1() error {
	if !e.o.phases[v1Phase] {
		return nil
	}
	logf("building %s (commit %s) for %s", framework.LastV1Release, framework.LastV1Commit, v1Phase)
	bin, err := framework.BuildRevision(framework.LastV1Commit)
	if err != nil {
		return fmt.Errorf("%s: %w", v1Phase, err)
	}
	e.v1 = bin
	return nil
}

// v1Controller is ours as the last v1-only release, with the same flags.
func (e *env) v1Controller() controllerSpec {
	s := e.ourController()
	s.Config, s.Name, s.bin = "v1", "book-controller "+framework.LastV1Release+" (v1 only)", e.v1
	return s
}

// v1BacklogUnit runs the last v1-only release's backlog phase under its
// own CRD.
func (e *env) v1BacklogUnit(ctx context.Context, _ *Round) ([]*Phase, error) {
	crd, err := framework.V1OnlyCRD()
	if err != nil {
		return nil, err
	}
	return e.swappedUnit(ctx, v1Phase, crd, e.v1Controller(), e.v1Books())
}

// v2OnlyBacklogUnit runs ours' backlog phase under a CRD that serves v2
// alone, as a cluster does once no client reads v1 and v1 is removed: no
// watch cache converts anything.
func (e *env) v2OnlyBacklogUnit(ctx context.Context, _ *Round) ([]*Phase, error) {
	crd, err := v2OnlyCRD()
	if err != nil {
		return nil, err
	}
	s := e.ourController()
	s.Config, s.Name = "v2-only", "book-controller, v1 not served"
	return e.swappedUnit(ctx, v2OnlyPhase, crd, s, e.v2Books())
}

// v2OnlyCRD is manifests/crd.yaml without v1, so without conversion.
func v2OnlyCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := framework.LoadCRD()
	if err != nil {
		return nil, err
	}
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name != "v2" })
	if len(crd.Spec.Versions) != 1 {
		return nil, fmt.Errorf("manifests/%s has no version v2", framework.CRDFile)
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	return crd, nil
}

// swappedUnit swaps the Book CRD for crd, warms it with an unmeasured
// backlog run, measures the phase called name, and swaps manifests/crd.yaml
// back, warmed by the load generator.
func (e *env) swappedUnit(ctx context.Context, name string, crd *apiextensionsv1.CustomResourceDefinition, s controllerSpec, api bookAPI) ([]*Phase, error) {
	if err := e.replaceCRD(ctx, crd); err != nil {
		return nil, err
	}
	warm, err := e.backlogPhaseOf(ctx, name+"-warm-up", s, api)
	if derr := e.deleteNamespace(ctx, warm); err == nil {
		err = derr
	}
	if err != nil {
		return nil, fmt.Errorf("warming the swapped CRD (not measured): %w", err)
	}
	p, err := e.backlogPhaseOf(ctx, name, s, api)
	if derr := e.deleteNamespace(ctx, p); err == nil {
		err = derr
	}
	if err != nil {
		return []*Phase{p}, err
	}
	twoVersions, err := framework.LoadCRD()
	if err == nil {
		err = e.replaceCRD(ctx, twoVersions)
	}
	if err == nil {
		err = e.warmUp(ctx, "warm-up after the swap back to "+framework.CRDFile)
	}
	return []*Phase{p}, err
}

// replaceCRD deletes the Book CRD, which must hold no Book, and creates crd
// in its place. The test conversion webhook (framework.ServeConversion)
// writes its URL and CA into the CRD when it starts, so it is restarted for
// a CRD that converts.
func (e *env) replaceCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	if e.stopConversion != nil {
		e.stopConversion()
		e.stopConversion = nil
	}
	crds := e.ext.ApiextensionsV1().CustomResourceDefinitions()
	if err := crds.Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the CRD %s: %w", crd.Name, err)
	}
	err := poll.Until(ctx, "the CRD "+crd.Name+" to be deleted", 20*time.Millisecond, time.Minute, func(ctx context.Context) error {
		_, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		return poll.Done(apierrors.IsNotFound(err), "%v", err)
	})
	if err != nil {
		return err
	}
	if err := framework.ApplyCRD(ctx, e.ext, crd); err != nil {
		return err
	}
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		return nil
	}
	stop, err := framework.ServeConversion(ctx, e.kubecfg)
	if err != nil {
		return err
	}
	e.stopConversion = stop
	return nil
}

// v1Books creates and watches Books through v1, as the release's users did.
func (e *env) v1Books() bookAPI {
	return bookAPI{
		precreate: func(ctx context.Context, ns string, n int) error {
			client := e.books.WebappV1().Books(ns)
			_, err := work(ctx, n, e.o.preCreateConcy, 0, func(i int) error {
				b := &webappv1.Book{ObjectMeta: metav1.ObjectMeta{Name: bookName(i), Namespace: ns},
					Spec: webappv1.BookSpec{Title: "Book number " + strconv.Itoa(i), Price: int32(i % 1000)}}
				return withRetries(func() error {
					_, err := client.Create(ctx, b, metav1.CreateOptions{})
					return err
				})
			})
			if err != nil {
				return fmt.Errorf("creating v1 Books: %w", err)
			}
			return nil
		},
		source: func(ns string) readySource { return v1Source(e.watch, ns) },
	}
}

// v1Source lists and watches the Books of ns through v1.
func v1Source(books versioned.Interface, ns string) readySource {
	client := books.WebappV1().Books(ns)
	return typedSource(client.List, client.Watch, func(l *webappv1.BookList) ([]webappv1.Book, string) {
		return l.Items, l.ResourceVersion
	}, framework.IsReadyV1)
}
