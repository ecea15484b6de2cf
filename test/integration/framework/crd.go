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
	"sigs.k8s.io/yaml"

	"ydzs.io/book-controller/internal/poll"
	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
)

// CRDFile is the Book CRD in manifests/, the one users apply.
const CRDFile = "crd.yaml"

// LoadCRD reads manifests/crd.yaml, the file users apply.
func LoadCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	return LoadCRDFile(CRDFile)
}

// LoadCRDFile reads the CRD in the file name of manifests/.
func LoadCRDFile(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(filepath.Join(RepoRoot(), "manifests", name))
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("decoding manifests/%s: %w", name, err)
	}
	return crd, nil
}

// InstallCRD creates the Book CRD of manifests/crd.yaml and waits until it
// is Established, when its API is served.
func InstallCRD(ctx context.Context, client apiextensionsclient.Interface) error {
	return InstallCRDFile(ctx, client, CRDFile)
}

// InstallCRDFile is InstallCRD with the CRD in the file name of manifests/.
func InstallCRDFile(ctx context.Context, client apiextensionsclient.Interface, name string) error {
	crd, err := LoadCRDFile(name)
	if err != nil {
		return err
	}
	return ApplyCRD(ctx, client, crd)
}

// ApplyCRD creates crd unless it exists and waits up to a minute until it is
// Established, when its API is served.
func ApplyCRD(ctx context.Context, client apiextensionsclient.Interface, crd *apiextensionsv1.CustomResourceDefinition) error {
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the CRD %s: %w", crd.Name, err)
	}
	return poll.Until(ctx, "the CRD "+crd.Name+" to be Established", PollInterval, time.Minute, func(ctx context.Context) error {
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
}

// BookResource is the Book resource for dynamic clients.
func (e *Env) BookResource() schema.GroupVersionResource {
	return webappv2.SchemeGroupVersion.WithResource("books")
}
