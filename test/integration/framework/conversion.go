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
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"ydzs.io/book-controller/internal/poll"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
	"ydzs.io/book-controller/pkg/webhook"
)

// ConversionNamespace holds the Secret of the conversion webhook a test
// environment serves (serveConversion).
const ConversionNamespace = "book-test-conversion"

// conversionEnv, set to a kubeconfig's path, makes a test binary the
// conversion webhook of that cluster instead of running tests (init).
const conversionEnv = "BOOK_TEST_CONVERSION_WEBHOOK"

// The test binary that serveConversion starts serves the webhook, before
// any TestMain runs, until it is stopped or its parent exits.
func init() {
	kubeconfig := os.Getenv(conversionEnv)
	if kubeconfig == "" {
		return
	}
	if err := serveConversionUntilStopped(kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "conversion webhook:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveConversion runs the Book CRD's conversion webhook on a loopback
// port and points the installed CRD at it with its CA, as a controller's
// --webhook-loopback does for `make run`. The API server then reads and
// writes v1 Books of the v2-stored CRD, the tests' and its own v1 watch
// cache's, whichever controller runs, or none: the controllers the tests
// start serve no webhook, since the CRD names none of theirs
// (manager.Webhook's converts). It serves until Teardown.
func (e *Env) serveConversion(ctx context.Context) error {
	stop, err := ServeConversion(ctx, e.Cluster.KubeconfigPath())
	if err != nil {
		return err
	}
	e.stopConversion = stop
	return nil
}

// ServeConversion starts the conversion webhook for the cluster of
// kubeconfig, as a process of its own (this program again, see init), so
// that its goroutines and connections are no test's leak, and returns once
// a v1 list of Books works; stop ends it.
func ServeConversion(ctx context.Context, kubeconfig string) (stop func(), err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// The v1 list below, which proves the webhook answers, gets v1's
	// deprecation warning: expected here, and noise in a test's or the
	// bench's output.
	cfg.WarningHandler = rest.NoWarnings{}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	books, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ConversionNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the namespace %s: %w", ConversionNamespace, err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the conversion webhook: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), conversionEnv+"="+kubeconfig)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// The child stops when this pipe closes: at stop, or when this process
	// dies without calling it.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the conversion webhook: %w", err)
	}
	stop = func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	err = poll.Until(ctx, "a v1 list of Books through the conversion webhook", PollInterval, time.Minute, func(ctx context.Context) error {
		_, err := books.WebappV1().Books("").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("%w; the webhook's output:\n%s", err, out.String())
	}
	return stop, nil
}

// serveConversionUntilStopped is the webhook process: its certificates in a
// Secret of ConversionNamespace, its CA and URL in the CRD, kept there
// while it serves.
func serveConversionUntilStopped(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var certs atomic.Pointer[webhook.Certs]
	srv, err := webhook.Listen("127.0.0.1:0", webhook.NewHandler(nil, 0).Mux(), func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return certs.Load().GetCertificate(h)
	}, webhook.DefaultTimeouts)
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	c, err := webhook.NewCerts(webhook.CertConfig{Kube: kube, CRDs: crds, Namespace: ConversionNamespace,
		LoopbackURL: "https://" + net.JoinHostPort("127.0.0.1", port) + webhook.Path})
	if err != nil {
		return err
	}
	certs.Store(c)
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	srv.Serve(ctx)
	<-ctx.Done()
	srv.Stop()
	return nil
}

// lockedBuffer is a bytes.Buffer that a child process's output and a
// reader may use at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
