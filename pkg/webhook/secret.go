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
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// readSecret reads the Secret, or creates it with new certificates; on
// AlreadyExists, another replica was first, and its Secret is read. A
// Secret without ManagedLabel is someone else's: an error.
func (c *Certs) readSecret(ctx context.Context, now time.Time) (*corev1.Secret, error) {
	logger := klog.FromContext(ctx)
	secrets := c.cfg.Kube.CoreV1().Secrets(c.cfg.Namespace)
	ref := klog.KRef(c.cfg.Namespace, c.cfg.SecretName)
	secret, err := secrets.Get(ctx, c.cfg.SecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		st, err := c.fresh(now)
		if err != nil {
			return nil, err
		}
		created, err := secrets.Create(ctx, c.toSecret(st, nil), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Another replica was first: use its certificates.
			created, err = secrets.Get(ctx, c.cfg.SecretName, metav1.GetOptions{})
		} else if err == nil {
			logger.Info("Created the conversion webhook's certificates", "secret", ref, "caNotAfter", st.ca.cert.NotAfter)
			c.event(created, EventWebhookCertsCreated, "Created a CA and a serving certificate for the conversion webhook")
		}
		if err != nil {
			return nil, fmt.Errorf("creating Secret %s: %w", ref, err)
		}
		secret = created
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s: %w", ref, err)
	}
	if secret.Labels[ManagedLabel] != managedLabelValue {
		return nil, fmt.Errorf("Secret %s exists without the label %s=%s, so it is not the webhook's: delete it, or let the webhook use another name", ref, ManagedLabel, managedLabelValue)
	}

	return secret, nil
}

// fresh is a new CA and its serving certificate.
func (c *Certs) fresh(now time.Time) (*state, error) {
	ca, err := newCA(now, c.cfg.CALifetime)
	if err != nil {
		return nil, err
	}
	serving, err := newServing(ca, now, c.cfg.ServingLifetime, c.dnsNames, c.ips)
	if err != nil {
		return nil, err
	}
	return &state{ca: ca, serving: serving, bundle: ca.certPEM, stepAt: now}, nil
}

func fromSecret(s *corev1.Secret) (*state, error) {
	ca, err := parseKeyPair(s.Data[keyCACert], s.Data[keyCAKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyCACert, err)
	}
	serving, err := parseKeyPair(s.Data[keyServingCert], s.Data[keyServingKey])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyServingCert, err)
	}
	st := &state{ca: ca, serving: serving, bundle: s.Data[keyBundle]}
	if _, ok := s.Data[keyNextCACert]; ok {
		if st.next, err = parseKeyPair(s.Data[keyNextCACert], s.Data[keyNextCAKey]); err != nil {
			return nil, fmt.Errorf("%s: %w", keyNextCACert, err)
		}
	}
	if cas, err := parseBundle(st.bundle); err != nil || len(cas) == 0 {
		return nil, fmt.Errorf("%s: no certificates (%v)", keyBundle, err)
	}
	if st.stepAt, err = time.Parse(time.RFC3339, s.Annotations[stepAnnotation]); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", stepAnnotation, err)
	}
	return st, nil
}

// toSecret writes st into old (a copy), or into a new Secret.
func (c *Certs) toSecret(st *state, old *corev1.Secret) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.cfg.SecretName, Namespace: c.cfg.Namespace}, Type: corev1.SecretTypeOpaque}
	if old != nil {
		s = old.DeepCopy()
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[ManagedLabel] = managedLabelValue
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[stepAnnotation] = st.stepAt.UTC().Format(time.RFC3339Nano)
	s.Data = map[string][]byte{
		keyCACert: st.ca.certPEM, keyCAKey: st.ca.keyPEM,
		keyServingCert: st.serving.certPEM, keyServingKey: st.serving.keyPEM,
		keyBundle: st.bundle,
	}
	if st.next != nil {
		s.Data[keyNextCACert], s.Data[keyNextCAKey] = st.next.certPEM, st.next.keyPEM
	}
	return s
}
