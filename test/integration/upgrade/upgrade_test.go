//go:build upgrade

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

package upgrade_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"ydzs.io/book-controller/internal/poll"
	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/test/integration/framework"
)

// lastV1Release is the last release that serves only webapp.ydzs.io/v1, at
// the commit CHANGELOG.md gives for it.
const (
	lastV1Release = framework.LastV1Release
	lastV1Commit  = framework.LastV1Commit
)

// upgradeBooks are created, from the release's v1 examples, before the
// upgrade; leaseID is the Lease of old and new controllers alike.
const (
	upgradeBooks = 2000
	leaseID      = "book-controller"
)

// release is an installation of lastV1Release: its CRD, its controller as
// the leader, and upgradeBooks Books, Ready.
type release struct {
	ns, oldBinary string
	// names are the Books' names, in the order of their creation.
	names []string
	// old is the release's controller; newer is this build's.
	old, newer *framework.Replica
	// configMaps is each ConfigMap's data before the step under test: the
	// upgrade, then the rollback.
	configMaps map[string]map[string]string
	// total is the number of Books.
	total int
	// v2Prices are the prices of the Books edited through v2.
	v2Prices map[string]webappv2.Price
}

// TestUpgradeFromTheLastV1ReleaseAndBack installs lastV1Release with
// upgradeBooks Books, upgrades it as `kubectl apply -k` of this build would
// (the two-version CRD first, then a rolling update of the controller),
// applies the v1 examples with kubectl, and rolls the controller back to
// the release while the two-version CRD stays, conversion then served by
// this build's --webhook-only.
func TestUpgradeFromTheLastV1ReleaseAndBack(t *testing.T) {
	r := installRelease(t)
	r.upgrade(t)
	r.bothVersionsList(t, upgradeBooks)
	r.applyV1Examples(t)
	r.rollBack(t)
}

// installRelease builds lastV1Release from the repository's history, and
// installs it as its users did: its CRD, its controller, and Books from its
// v1 examples.
func installRelease(t *testing.T) *release {
	changelogNamesTheRelease(t)
	bin, err := framework.BuildRevision(lastV1Commit)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(gitShow(t, "manifests/crd.yaml"), crd); err != nil {
		t.Fatalf("the CRD of %s: %v", lastV1Release, err)
	}
	if err := framework.ApplyCRD(t.Context(), env.Extensions, crd); err != nil {
		t.Fatal(err)
	}
	r := &release{ns: env.Namespace(t), oldBinary: bin, total: upgradeBooks, v2Prices: map[string]webappv2.Price{}}
	r.old = env.StartReplica(t, bin, lastV1Release, framework.ReplicaOptions{Namespace: r.ns, LeaseID: leaseID, Release: true})
	env.WaitForLeaseHolder(t, r.ns, leaseID, r.old)
	start := time.Now()
	books := fromExamples(t, r.ns, upgradeBooks)
	for _, b := range books {
		r.names = append(r.names, b.Name)
	}
	env.CreateAllV1(t, books)
	waitConverged(t, fmt.Sprintf("%d Books in %s Ready", upgradeBooks, r.ns), env.BooksReadyV1(r.ns, upgradeBooks))
	t.Logf("%s: %d Books from its v1 examples Ready %v after the first create", lastV1Release, upgradeBooks, time.Since(start).Round(time.Millisecond))
	r.configMaps = configMapData(t, r.ns)
	return r
}

// changelogNamesTheRelease keeps lastV1Commit and CHANGELOG.md one fact.
func changelogNamesTheRelease(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(lastV1Release) + `\].*\n+Commit ` + "`" + lastV1Commit + "`")
	if !re.Match(data) {
		t.Fatalf("CHANGELOG.md does not give commit %s for %s: make the two agree", lastV1Commit, lastV1Release)
	}
}

// gitShow is a file of the repository at lastV1Commit.
func gitShow(t *testing.T, path string) []byte {
	out, err := exec.Command("git", "-C", framework.RepoRoot(), "show", lastV1Commit+":"+path).Output()
	if err != nil {
		t.Fatalf("git show %s:%s (a shallow clone lacks the commit: fetch the history): %v", lastV1Commit, path, err)
	}
	return out
}

// fromExamples is n Books in ns made from the release's v1 examples, in
// turn, each named after its example and numbered.
func fromExamples(t *testing.T, ns string, n int) []*webappv1.Book {
	var examples []*webappv1.Book
	for _, name := range releaseExamples(t) {
		b := &webappv1.Book{}
		if err := yaml.UnmarshalStrict(gitShow(t, name), b); err != nil {
			t.Fatalf("%s of %s: %v", name, lastV1Release, err)
		}
		examples = append(examples, b)
	}
	books := make([]*webappv1.Book, n)
	for i := range books {
		ex := examples[i%len(examples)]
		books[i] = &webappv1.Book{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%04d", ex.Name, i)}, Spec: ex.Spec}
	}
	return books
}

// releaseExamples lists the release's v1 examples (not invalid/).
func releaseExamples(t *testing.T) []string {
	out, err := exec.Command("git", "-C", framework.RepoRoot(), "ls-tree", "--name-only", lastV1Commit, "manifests/examples/").Output()
	if err != nil {
		t.Fatalf("git ls-tree %s manifests/examples/: %v", lastV1Commit, err)
	}
	var files []string
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, ".yaml") {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Fatalf("%s has no v1 examples in manifests/examples/", lastV1Commit)
	}
	return files
}

// convergeTimeout bounds a wait for thousands of Books to converge: 26–36 s
// here alone, and over a minute with another suite on the same two cores.
const convergeTimeout = 5 * time.Minute

// waitConverged waits, up to convergeTimeout, for check to pass.
func waitConverged(t *testing.T, what string, check poll.Check) {
	t.Helper()
	poll.Eventually(t, what, framework.PollInterval, convergeTimeout, check)
}
