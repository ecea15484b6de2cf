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

package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// readCRD returns the CRD and its caBundle when its conversion goes through
// a webhook; nil, nil when there is no such CRD or it converts nothing
// (manifests/crd.yaml, v1 alone), which is left alone.
func (c *Certs) readCRD(ctx context.Context) (*apiextensionsv1.CustomResourceDefinition, []byte, error) {
	if c.cfg.CRDs == nil {
		return nil, nil, nil
	}
	crd, err := c.cfg.CRDs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, c.cfg.CRDName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading CRD %s: %w", c.cfg.CRDName, err)
	}
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return nil, nil, nil
	}
	return crd, conv.Webhook.ClientConfig.CABundle, nil
}

// patchCRD writes bundle (and, with LoopbackURL, the URL) into the CRD's
// clientConfig if it differs.
func (c *Certs) patchCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, bundle []byte) error {
	if crd == nil {
		return nil
	}
	cc := crd.Spec.Conversion.Webhook.ClientConfig
	clientConfig := map[string]any{}
	if !bytes.Equal(cc.CABundle, bundle) {
		clientConfig["caBundle"] = bundle // JSON: base64
	}
	if c.cfg.LoopbackURL != "" && (cc.URL == nil || *cc.URL != c.cfg.LoopbackURL || cc.Service != nil) {
		clientConfig["url"], clientConfig["service"] = c.cfg.LoopbackURL, nil
	}
	if len(clientConfig) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{"clientConfig": clientConfig}}}})
	if err != nil {
		return err
	}
	// The resourceVersion makes it a compare-and-swap: a replica with an
	// old view of the CRD gets a conflict, not the last word.
	patch, err = addResourceVersion(patch, crd.ResourceVersion)
	if err != nil {
		return err
	}
	if _, err := c.cfg.CRDs.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, c.cfg.CRDName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patching CRD %s's conversion webhook clientConfig: %w", c.cfg.CRDName, err)
	}
	klog.FromContext(ctx).Info("Patched the CRD's conversion webhook clientConfig", "crd", c.cfg.CRDName, "caBundleChanged", clientConfig["caBundle"] != nil, "url", c.cfg.LoopbackURL)
	return nil
}

func addResourceVersion(patch []byte, rv string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"resourceVersion": rv}
	return json.Marshal(m)
}
