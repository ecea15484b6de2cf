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

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ydzs.io/book-controller/test/integration/framework"
)

// crdName is the Book CRD's name.
const crdName = "books.webapp.ydzs.io"

// TestUninstall runs docs/deploy.md's uninstall commands, the make targets
// themselves, against the API server, over what `make deploy` applies and a
// Book with the ConfigMap the controller gives it:
//
//   - `make undeploy-controller` removes the controller and keeps the CRD,
//     the Books and their ConfigMaps (also with the namespaced overlay,
//     whose watched namespace stays);
//   - `make undeploy MANIFESTS=manifests/overlays/namespaced` deletes the
//     watched namespace, and so its Books, but not the CRD;
//   - `make undeploy` deletes everything, the CRD and with it every Book,
//     and the garbage collector their ConfigMaps.
//
// It runs last in the package (its file sorts last), and puts the CRD back.
func TestUninstall(t *testing.T) {
	ctx := context.Background()
	// The garbage collector must watch Books from the start to delete
	// their ConfigMaps when the CRD goes (it looks for new types every 30 s).
	if err := env.InstallCRDBeforeGC(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := framework.InstallCRD(context.Background(), env.Extensions); err != nil {
			t.Errorf("putting the CRD back: %v", err)
		}
	})

	t.Run("every object but the CRD and the watched namespace is labelled", func(t *testing.T) {
		// undeploy-controller deletes by this label: an object without it
		// would be left behind, one with it would be deleted.
		watched := watchedNamespace(t, env.RenderManifests(t, namespacedDir))
		for _, dir := range overlays {
			for _, obj := range env.RenderManifests(t, dir) {
				keep := obj.GetKind() == "CustomResourceDefinition" || (obj.GetKind() == "Namespace" && obj.GetName() == watched)
				if labelled := obj.GetLabels()["app.kubernetes.io/name"] == controllerName; labelled == keep {
					t.Errorf("%s: %s %s/%s: app.kubernetes.io/name=%s is %v, want %v (make undeploy-controller deletes by it)",
						dir, obj.GetKind(), obj.GetNamespace(), obj.GetName(), controllerName, labelled, !keep)
				}
			}
		}
	})

	t.Run("controller only", func(t *testing.T) {
		kubectl(t, "apply", "-k", filepath.Join(framework.RepoRoot(), baseDir))
		ns := env.Namespace(t)
		seedBook(t, ns, "kept")
		runMake(t, "undeploy-controller", baseDir)
		assertGone(t, "namespace "+controllerNamespace, namespaceGetter(controllerNamespace))
		assertGone(t, "ClusterRole "+controllerName, func(ctx context.Context) error {
			_, err := env.Kube.RbacV1().ClusterRoles().Get(ctx, controllerName, metav1.GetOptions{})
			return err
		})
		assertKept(t, ns, "kept")
	})

	t.Run("namespaced overlay", func(t *testing.T) {
		kubectl(t, "apply", "-k", filepath.Join(framework.RepoRoot(), namespacedDir))
		watched := watchedNamespace(t, env.RenderManifests(t, namespacedDir))
		seedBook(t, watched, "kept")
		runMake(t, "undeploy-controller", namespacedDir)
		assertGone(t, "namespace "+controllerNamespace, namespaceGetter(controllerNamespace))
		assertGone(t, "Role "+watched+"/"+controllerName, func(ctx context.Context) error {
			_, err := env.Kube.RbacV1().Roles(watched).Get(ctx, controllerName, metav1.GetOptions{})
			return err
		})
		assertKept(t, watched, "kept")

		runMake(t, "undeploy", namespacedDir)
		assertGone(t, "the watched namespace "+watched, namespaceGetter(watched))
		if _, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{}); err != nil {
			t.Errorf("make undeploy of the namespaced overlay deleted the CRD, which it never installs: %v", err)
		}
	})

	t.Run("everything", func(t *testing.T) {
		kubectl(t, "apply", "-k", filepath.Join(framework.RepoRoot(), baseDir))
		ns := env.Namespace(t)
		seedBook(t, ns, "gone")
		runMake(t, "undeploy", baseDir)
		assertGone(t, "the CRD", func(ctx context.Context) error {
			_, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
			return err
		})
		assertGone(t, "namespace "+controllerNamespace, namespaceGetter(controllerNamespace))
		assertGone(t, "ConfigMap "+ns+"/gone (garbage-collected with its Book)", func(ctx context.Context) error {
			_, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "gone", metav1.GetOptions{})
			return err
		})
	})
}

// kubectl runs the kubectl of the test cluster.
func kubectl(t *testing.T, args ...string) {
	t.Helper()
	args = append(args, "--kubeconfig", env.Cluster.KubeconfigPath())
	if out, err := exec.Command(env.Kubectl(t), args...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// runMake runs a make target of the repository against the test cluster,
// with its kubectl, for the kustomization manifests.
func runMake(t *testing.T, target, manifests string) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "-C", framework.RepoRoot(), target,
		"MANIFESTS="+manifests, "KUBECTL="+env.Kubectl(t), "KUBECONFIG="+env.Cluster.KubeconfigPath())
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make %s MANIFESTS=%s: %v\n%s", target, manifests, err, out)
	}
	t.Logf("make %s MANIFESTS=%s:\n%s", target, manifests, out)
}

// seedBook creates a Book and the ConfigMap the controller would make for
// it, controlled by it.
func seedBook(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	book, err := env.Books.WebappV2().Books(ns).Create(ctx, framework.NewBook(ns, name, "Dune", 10), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "webapp.ydzs.io/v2", Kind: "Book", Name: name, UID: book.UID, Controller: &yes, BlockOwnerDeletion: &yes,
		}}},
		Data: map[string]string{"title": "Dune", "price": "10"},
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// assertKept fails unless the CRD, the Book and its ConfigMap are there.
func assertKept(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{}); err != nil {
		t.Errorf("the CRD is gone: %v", err)
	}
	if _, err := env.Books.WebappV2().Books(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Book %s/%s is gone: %v", ns, name, err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the ConfigMap %s/%s is gone: %v", ns, name, err)
	}
}

// assertGone waits until get answers NotFound.
func assertGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	framework.Eventually(t, what+" to be deleted", func(ctx context.Context) error {
		switch err := get(ctx); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("still there")
	})
}

func namespaceGetter(name string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := env.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return err
	}
}
