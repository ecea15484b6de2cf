package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	webappv1 "ydzs.io/book-controller/pkg/apis/webapp/v1"
)

// LoadCRD reads manifests/crd.yaml, the file users apply.
func LoadCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "manifests", "crd.yaml"))
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decoding manifests/crd.yaml: %w", err)
	}
	return crd, nil
}

// InstallCRD creates the Book CRD and waits until it is Established, when
// its API is served.
func InstallCRD(ctx context.Context, client apiextensionsclient.Interface) error {
	crd, err := LoadCRD()
	if err != nil {
		return err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the Book CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// BookResource is the Book resource for dynamic clients.
func (e *Env) BookResource() schema.GroupVersionResource {
	return webappv1.SchemeGroupVersion.WithResource("books")
}
