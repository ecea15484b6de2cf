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

package versions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/ui"
	"ydzs.io/book-controller/test/integration/framework"
)

// checkConversionsShown: with the controller's live view on (pkg/ui),
// after a v2 Book is created and listed as v1, its JSON shows the API
// server's ConversionReview to the controller's webhook: a success, v2 to
// v1, naming that Book; and none failed. The controller itself reads and
// writes v2, so no conversion is its own.
func checkConversionsShown(t *testing.T, uiAddr, ns, name string) {
	t.Helper()
	ctx := t.Context()
	// The Books of earlier tests go first: the API server's v1 watch cache
	// converts each deletion through this controller's webhook, and
	// thousands of them would push this test's review out of the live
	// view's latest.
	framework.Eventually(t, "no Books but the controller's", func(ctx context.Context) error {
		list, err := env.Books.WebappV2().Books("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		others := slices.DeleteFunc(list.Items, func(b webappv2.Book) bool { return b.Namespace == ns })
		return poll.Done(len(others) == 0, "%d Books of earlier tests left", len(others))
	})
	// A Book in a namespace the controller does not watch, so that no
	// review for it is the controller's own: the API server converts it to
	// v1 as it is written, for its v1 watch cache, from which the v1 list
	// is then served.
	other := env.Namespace(t)
	before := getJSON[ui.Snapshot](t, uiAddr, "/api/snapshot").Conversions.Reviews
	if _, err := env.Books.WebappV2().Books(other).Create(ctx, &webappv2.Book{ObjectMeta: metav1.ObjectMeta{Name: "listed"},
		Spec: webappv2.BookSpec{Title: "t", Price: webappv2.Price{Amount: "5", Currency: "EUR"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := env.Books.WebappV1().Books(other).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Spec.Price != 5 {
		t.Fatalf("v1 list: %v, %+v", err, list)
	}
	listed := other + "/listed"
	var c ui.ConversionFigures
	framework.Eventually(t, "the conversion of "+other+"/listed in the live view", func(context.Context) error {
		c = getJSON[ui.Snapshot](t, uiAddr, "/api/snapshot").Conversions
		if !c.Serving || c.Reviews <= before {
			return fmt.Errorf("serving %v, %d reviews (%d before the list)", c.Serving, c.Reviews, before)
		}
		for _, rv := range c.Recent {
			if rv.Result == "success" && rv.DesiredAPIVersion == webappv1.SchemeGroupVersion.String() &&
				slices.Equal(rv.FromVersions, []string{webappv2.SchemeGroupVersion.String()}) && slices.Equal(rv.Books, []string{listed}) {
				return nil
			}
		}
		return fmt.Errorf("no successful v2 → v1 review of %s among the %d latest: %+v", listed, len(c.Recent), c.Recent)
	})
	t.Logf("conversion reviews: %d (%d before the create), results %v, objects %d", c.Reviews, before, c.Results, c.Objects)
	if c.Results["success"] != c.Reviews {
		t.Errorf("results %v of %d reviews, want all successes", c.Results, c.Reviews)
	}
}

// getJSON reads path of the live view into a T.
func getJSON[T any](t *testing.T, addr, path string) T {
	t.Helper()
	var v T
	code, body, err := framework.HTTPGet(addr, path)
	if err == nil && code != http.StatusOK {
		err = errors.New(body)
	}
	if err == nil {
		err = json.Unmarshal([]byte(body), &v)
	}
	if err != nil {
		t.Fatalf("GET %s: %d %v", path, code, err)
	}
	return v
}
