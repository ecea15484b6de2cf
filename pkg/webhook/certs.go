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
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of CertConfig.
const (
	// DefaultSecretName is the Secret that holds the webhook's CA and
	// serving certificate, shared by every replica.
	DefaultSecretName = "book-controller-webhook-certs"
	// DefaultServiceName is the Service in front of the webhook, the one
	// manifests/crd.yaml's clientConfig names.
	DefaultServiceName = "book-controller-webhook"
	// DefaultCRDName is the CRD whose caBundle is kept.
	DefaultCRDName = "books.webapp.ydzs.io"
	// DefaultCALifetime, DefaultServingLifetime: each is renewed at two
	// thirds of its lifetime.
	DefaultCALifetime      = 365 * 24 * time.Hour
	DefaultServingLifetime = 90 * 24 * time.Hour
	// DefaultRotationStep is how long each step of a CA rotation waits for
	// the one before it to reach the API server and every replica.
	DefaultRotationStep = 10 * time.Minute
	// DefaultCheckInterval is how often the Secret and the CRD are read.
	DefaultCheckInterval = time.Minute
)

// The Secret's label, which marks it as this webhook's: a Secret of that
// name without it is someone else's and is never written.
const (
	ManagedLabel      = "webapp.ydzs.io/webhook-certs"
	managedLabelValue = "book-controller"
	// stepAnnotation is when the last rotation step was taken (RFC 3339).
	stepAnnotation = "webapp.ydzs.io/webhook-certs-step-at"
)

// The Secret's keys.
const (
	keyCACert      = "ca.crt"
	keyCAKey       = "ca.key"
	keyNextCACert  = "next-ca.crt"
	keyNextCAKey   = "next-ca.key"
	keyServingCert = corev1.TLSCertKey
	keyServingKey  = corev1.TLSPrivateKeyKey
	keyBundle      = "ca-bundle.crt"
)

// Event reasons, on the Secret.
const (
	EventWebhookCertsCreated    = "WebhookCertificatesCreated"
	EventWebhookCARotating      = "WebhookCARotating"
	EventWebhookServingRenewed  = "WebhookServingCertificateRenewed"
	EventWebhookServingSwitched = "WebhookServingCertificateSwitched"
	EventWebhookCARetired       = "WebhookOldCARemoved"
)

// CertConfig configures the certificates of the webhook.
type CertConfig struct {
	// Kube reads and writes the Secret; CRDs reads and patches the CRD.
	Kube kubernetes.Interface
	CRDs apiextensionsclient.Interface
	// Namespace holds the Secret and the Service: the controller's.
	Namespace string
	// SecretName, ServiceName, CRDName: defaults above.
	SecretName, ServiceName, CRDName string
	// LoopbackURL, when set, points the CRD's clientConfig at this URL
	// (https://127.0.0.1:9443/convert) instead of the Service: for a
	// controller run outside the cluster (make run).
	LoopbackURL string
	// CALifetime, ServingLifetime, RotationStep, CheckInterval: defaults
	// above; short ones are for tests.
	CALifetime, ServingLifetime, RotationStep, CheckInterval time.Duration
	// Clock is time; nil is the real clock.
	Clock clock.WithTicker
	// Recorder sends Events on the Secret; nil sends none.
	Recorder events.EventRecorder
}

// Certs keeps the webhook's certificates in a Secret shared by the
// replicas and their CA in the CRD's caBundle, and serves the current
// serving certificate to the TLS server (GetCertificate).
//
// A CA rotation, begun at two thirds of the CA's lifetime, takes three
// steps, each a RotationStep after the one before, so that no conversion
// fails: the new CA is added to the caBundle (the API server trusts both);
// the serving certificate is switched to one the new CA signed (once the
// CRD trusts it); the old CA is removed (once every replica, reading the
// Secret every CheckInterval, serves the new certificate).
type Certs struct {
	cfg      CertConfig
	dnsNames []string
	ips      []net.IP

	serving atomic.Pointer[tls.Certificate]
	// loaded is the serving certificate's PEM, to parse it only on change.
	mu     sync.Mutex
	loaded []byte
	// Rotations counts the CA rotations and serving renewals this process
	// wrote, for tests and logs.
	rotations atomic.Int64
	// caRotations counts the CA rotations this process completed.
	caRotations atomic.Int64
	// lastStep is the reason of the last step this process wrote.
	lastStep atomic.Pointer[string]
}

// NewCerts checks cfg and fills in its defaults.
func NewCerts(cfg CertConfig) (*Certs, error) {
	if cfg.Kube == nil || cfg.Namespace == "" {
		return nil, errors.New("webhook certificates: a client and a namespace are required")
	}
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.SecretName, DefaultSecretName)
	def(&cfg.ServiceName, DefaultServiceName)
	def(&cfg.CRDName, DefaultCRDName)
	defd(&cfg.CALifetime, DefaultCALifetime)
	defd(&cfg.ServingLifetime, DefaultServingLifetime)
	defd(&cfg.RotationStep, DefaultRotationStep)
	defd(&cfg.CheckInterval, DefaultCheckInterval)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	// Two steps of the rotation must fit in the last third of the CA's
	// life, and a replica must read the Secret within a step.
	if 2*cfg.RotationStep >= cfg.CALifetime/3 || cfg.CheckInterval >= cfg.RotationStep {
		return nil, fmt.Errorf("webhook certificates: want check interval (%s) < rotation step (%s) < CA lifetime / 6 (%s)",
			cfg.CheckInterval, cfg.RotationStep, cfg.CALifetime/6)
	}
	svc := cfg.ServiceName
	return &Certs{
		cfg: cfg,
		dnsNames: []string{svc, svc + "." + cfg.Namespace, svc + "." + cfg.Namespace + ".svc",
			svc + "." + cfg.Namespace + ".svc.cluster.local", "localhost"},
		ips: []net.IP{net.IPv4(127, 0, 0, 1).To4()},
	}, nil
}

// GetCertificate is tls.Config's: the serving certificate now.
func (c *Certs) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cert := c.serving.Load(); cert != nil {
		return cert, nil
	}
	return nil, errors.New("no serving certificate yet")
}

// Rotations is how many steps of rotation this process wrote (CA rotation
// steps and serving renewals).
func (c *Certs) Rotations() int64 { return c.rotations.Load() }

// CARotations is how many CA rotations this process completed (removed the
// old CA).
func (c *Certs) CARotations() int64 { return c.caRotations.Load() }

// Start reads (or creates) the Secret, serves its certificate and writes its
// CA into the CRD, then keeps them fresh every CheckInterval until ctx ends.
// The first round's error is returned; later ones are logged and retried.
func (c *Certs) Start(ctx context.Context) error {
	// Replicas starting together race for the Secret and the CRD; the loser
	// of a write reads the winner's and goes on.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { return c.Sync(ctx) }); err != nil {
		return err
	}
	ticker := c.cfg.Clock.NewTicker(c.cfg.CheckInterval)
	go func() {
		defer ticker.Stop()
		logger := klog.FromContext(ctx)
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C():
			}
			if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
				logger.Error(err, "Keeping the conversion webhook's certificates", "secret", klog.KRef(c.cfg.Namespace, c.cfg.SecretName))
			}
		}
	}()
	return nil
}

// state is what the Secret holds.
type state struct {
	ca, next, serving *keyPair
	bundle            []byte // the CAs the API server is to trust, PEM
	stepAt            time.Time
}

// Sync is one round: the Secret read, a step of rotation taken if one is
// due (and written; on a conflict with another replica, the next round
// reads its write), its serving certificate loaded, the CRD's clientConfig
// patched if it differs.
func (c *Certs) Sync(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	secrets := c.cfg.Kube.CoreV1().Secrets(c.cfg.Namespace)
	ref := klog.KRef(c.cfg.Namespace, c.cfg.SecretName)
	now := c.cfg.Clock.Now()

	crd, trusted, err := c.readCRD(ctx)
	if err != nil {
		return err
	}

	secret, err := c.readSecret(ctx, now)
	if err != nil {
		return err
	}
	st, err := fromSecret(secret)
	if err != nil {
		logger.Info("The webhook's Secret is unreadable; making new certificates", "secret", ref, "err", err)
		st = nil
	}
	next, reason, note, err := c.plan(st, now, trusted)
	if err != nil {
		return err
	}
	if next != nil {
		updated, err := secrets.Update(ctx, c.toSecret(next, secret), metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("writing Secret %s (%s): %w", ref, reason, err)
		}
		c.rotations.Add(1)
		c.lastStep.Store(&reason)
		if reason == EventWebhookCARetired {
			c.caRotations.Add(1)
		}
		logger.Info("Rotated the conversion webhook's certificates", "secret", ref, "step", reason, "note", note)
		c.event(updated, reason, note)
		st = next
	}
	if err := c.load(st.serving); err != nil {
		return err
	}
	return c.patchCRD(ctx, crd, st.bundle)
}

// plan returns the Secret's next state and why, or nil when nothing is due.
// trusted is the CRD's caBundle (nil when the CRD takes none).
func (c *Certs) plan(st *state, now time.Time, trusted []byte) (*state, string, string, error) {
	if st == nil || !now.Before(st.ca.cert.NotAfter) {
		fresh, err := c.fresh(now)
		return fresh, EventWebhookCertsCreated, "Created a CA and a serving certificate for the conversion webhook", err
	}
	stepDue := !now.Before(st.stepAt.Add(c.cfg.RotationStep))
	switch {
	case st.next != nil && stepDue && (trusted == nil || bytes.Contains(trusted, st.next.certPEM)):
		// Step 2: the API server trusts the new CA; serve its certificate.
		serving, err := newServing(st.next, now, c.cfg.ServingLifetime, c.dnsNames, c.ips)
		if err != nil {
			return nil, "", "", err
		}
		return &state{ca: st.next, serving: serving, bundle: st.bundle, stepAt: now}, EventWebhookServingSwitched,
			"Serving a certificate of the new CA; the old CA stays trusted for one more rotation step", nil
	case st.next == nil && !bytes.Equal(st.bundle, st.ca.certPEM) && stepDue:
		// Step 3: every replica serves the new CA's certificate.
		return &state{ca: st.ca, serving: st.serving, bundle: st.ca.certPEM, stepAt: now}, EventWebhookCARetired,
			"Removed the old CA from the caBundle", nil
	case st.next == nil && bytes.Equal(st.bundle, st.ca.certPEM) && !now.Before(dueAt(st.ca.cert)):
		// Step 1: trust a new CA next to the current one.
		next, err := newCA(now, c.cfg.CALifetime)
		if err != nil {
			return nil, "", "", err
		}
		return &state{ca: st.ca, next: next, serving: st.serving, bundle: append(bytes.Clone(st.bundle), next.certPEM...), stepAt: now},
			EventWebhookCARotating, "Added a new CA to the caBundle; its serving certificate follows in one rotation step", nil
	}
	if !signedBy(st.serving.cert, st.ca.cert) || !now.Before(dueAt(st.serving.cert)) || !namesMatch(st.serving.cert, c.dnsNames, c.ips) {
		serving, err := newServing(st.ca, now, c.cfg.ServingLifetime, c.dnsNames, c.ips)
		if err != nil {
			return nil, "", "", err
		}
		next := *st
		next.serving = serving
		return &next, EventWebhookServingRenewed, "Renewed the serving certificate", nil
	}
	return nil, "", "", nil
}

// load serves kp from the next handshake on.
func (c *Certs) load(kp *keyPair) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if bytes.Equal(c.loaded, kp.certPEM) {
		return nil
	}
	cert, err := tls.X509KeyPair(kp.certPEM, kp.keyPEM)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	c.serving.Store(&cert)
	c.loaded = kp.certPEM
	return nil
}

func (c *Certs) event(secret *corev1.Secret, reason, note string) {
	if c.cfg.Recorder == nil || secret == nil {
		return
	}
	c.cfg.Recorder.Eventf(secret, nil, corev1.EventTypeNormal, reason, "Rotate", note)
}
