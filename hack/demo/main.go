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

// Command demo is the part of `make demo` (hack/demo.sh) that talks to the
// cluster: it installs the Book CRD, applies the example Books, waits until
// the controller has made every one Ready and prints them as `kubectl get`
// would. It needs no kubectl, so a first `make demo` does not wait for one to
// be built; kubectl is only needed for poking at the cluster afterwards.
//
// Usage:
//
//	demo [-kubeconfig FILE] crd
//	demo [-kubeconfig FILE] [-controller-pid PID] examples
//	demo [-kubeconfig FILE] delete
//
// crd server-side applies manifests/crd.yaml (as `kubectl apply
// --server-side` would) and waits until it is Established; the controller
// refuses to start before. examples applies manifests/examples/v2/*.yaml,
// the Books of the controller's version, the same way, waits until every Book is Ready and prints them; delete removes
// the example Books.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	webappv2 "ydzs.io/book-controller/pkg/apis/webapp/v2"
	"ydzs.io/book-controller/pkg/generated/clientset/versioned"
)

// fieldManager owns what the demo applies, as kubectl's would.
const fieldManager = "book-controller-demo"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster; default: $KUBECONFIG, then ~/.kube/config")
	manifests := flag.String("manifests", "manifests", "directory with crd.yaml and examples/")
	pid := flag.Int("controller-pid", 0, "if set, fail as soon as this process (the controller) is gone instead of waiting out -timeout")
	timeout := flag.Duration("timeout", 90*time.Second, "how long to wait for every Book to be Ready")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] crd|examples|delete\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	d, err := newDemo(*kubeconfig, *manifests)
	if err == nil {
		ctx := context.Background()
		switch flag.Arg(0) {
		case "crd":
			err = d.applyCRD(ctx)
		case "examples":
			err = d.applyExamples(ctx, *pid, *timeout)
		case "delete":
			err = d.deleteExamples(ctx)
		default:
			flag.Usage()
			os.Exit(2)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demo struct {
	out        io.Writer
	manifests  string
	namespace  string
	cfg        *rest.Config
	kube       kubernetes.Interface
	books      versioned.Interface
	extensions apiextensionsclient.Interface
	examples   []*webappv2.Book
	// examplesDir holds the examples' files.
	examplesDir string
}

func newDemo(kubeconfig, manifests string) (*demo, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w: pass -kubeconfig or set KUBECONFIG", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = fieldManager
	d := &demo{out: os.Stdout, manifests: manifests, namespace: ns, cfg: cfg}
	if d.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if d.books, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if d.extensions, err = apiextensionsclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	d.examplesDir = filepath.Join(manifests, "examples")
	// fork:begin v2
	// The examples of the controller's version; examples/ holds v1's.
	d.examplesDir = filepath.Join(d.examplesDir, "v2")
	// fork:end v2
	files, err := filepath.Glob(filepath.Join(d.examplesDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no example Books in %s: run from the repository root or pass -manifests", d.examplesDir)
	}
	for _, f := range files {
		b := &webappv2.Book{}
		if err := readYAML(f, b); err != nil {
			return nil, err
		}
		if b.Namespace == "" {
			b.Namespace = ns
		}
		d.examples = append(d.examples, b)
	}
	return d, nil
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	return nil
}

func (d *demo) applyExamples(ctx context.Context, pid int, timeout time.Duration) error {
	heading("Applying " + d.examplesDir)
	for _, b := range d.examples {
		if err := d.applyBook(ctx, b); err != nil {
			return err
		}
		fmt.Fprintf(d.out, "book.webapp.ydzs.io/%s serverside-applied\n", b.Name)
	}
	heading("Waiting for every Book to be Ready")
	if err := d.waitReady(ctx, pid, timeout); err != nil {
		return err
	}
	heading("Books (kubectl get books)")
	if err := d.printTable(ctx, d.books.WebappV2().RESTClient(), "books"); err != nil {
		return err
	}
	heading("Their ConfigMaps (kubectl get configmaps -l app.kubernetes.io/managed-by=book-controller)")
	if err := d.printTable(ctx, d.kube.CoreV1().RESTClient(), "configmaps", "labelSelector", "app.kubernetes.io/managed-by=book-controller"); err != nil {
		return err
	}
	heading("Events of the Books (kubectl get events --field-selector involvedObject.kind=Book)")
	return d.printTable(ctx, d.kube.CoreV1().RESTClient(), "events", "fieldSelector", "involvedObject.kind=Book")
}

// applyCRD server-side applies crd.yaml and waits until the API serves Books.
func (d *demo) applyCRD(ctx context.Context) error {
	heading("Installing the Book CRD")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	path := filepath.Join(d.manifests, "crd.yaml")
	if err := readYAML(path, crd); err != nil {
		return err
	}
	data, err := json.Marshal(crd)
	if err != nil {
		return err
	}
	crds := d.extensions.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Patch(ctx, crd.Name, types.ApplyPatchType, data, applyOptions()); err != nil {
		return fmt.Errorf("applying %s: %w", path, err)
	}
	fmt.Fprintf(d.out, "customresourcedefinition.apiextensions.k8s.io/%s serverside-applied\n", crd.Name)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
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
	if err != nil {
		return fmt.Errorf("CRD %s not Established after a minute: %w", crd.Name, err)
	}
	fmt.Fprintf(d.out, "customresourcedefinition.apiextensions.k8s.io/%s condition met\n", crd.Name)
	return nil
}

func (d *demo) applyBook(ctx context.Context, b *webappv2.Book) error {
	b.APIVersion, b.Kind = webappv2.SchemeGroupVersion.String(), "Book"
	data, err := json.Marshal(b)
	if err != nil {
		return err
	}
	if _, err := d.books.WebappV2().Books(b.Namespace).Patch(ctx, b.Name, types.ApplyPatchType, data, applyOptions()); err != nil {
		return fmt.Errorf("applying Book %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}

func applyOptions() metav1.PatchOptions {
	force := true
	return metav1.PatchOptions{FieldManager: fieldManager, Force: &force}
}

// waitReady polls the examples' Ready conditions, printing the count when it
// changes, until all are Ready, the controller is gone, or timeout.
func (d *demo) waitReady(ctx context.Context, pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := -1
	for {
		ready := 0
		for _, b := range d.examples {
			got, err := d.books.WebappV2().Books(b.Namespace).Get(ctx, b.Name, metav1.GetOptions{})
			if err == nil && isReady(got) {
				ready++
			}
		}
		if ready != last {
			fmt.Fprintf(d.out, "    %d/%d Books Ready\n", ready, len(d.examples))
			last = ready
		}
		if ready == len(d.examples) {
			return nil
		}
		if pid > 0 && syscall.Kill(pid, 0) != nil {
			return fmt.Errorf("the controller (pid %d) exited; %d/%d Books Ready", pid, ready, len(d.examples))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d/%d Books Ready after %s", ready, len(d.examples), timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// isReady: Ready for the Book's current generation, as the tests count it
// (test/integration/framework.IsReady; a tool does not import the tests'
// framework).
func isReady(b *webappv2.Book) bool {
	for _, c := range b.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration == b.Generation &&
				b.Status.ObservedGeneration == b.Generation
		}
	}
	return false
}

// printTable asks the API server for its table of resource (the columns
// `kubectl get` shows, additionalPrinterColumns for Books) and prints it.
// params are query parameters as name, value pairs.
func (d *demo) printTable(ctx context.Context, client rest.Interface, resource string, params ...string) error {
	req := client.Get().Namespace(d.namespace).Resource(resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	raw, err := req.Do(ctx).Raw()
	if err != nil {
		return fmt.Errorf("listing %s: %w", resource, err)
	}
	table := &metav1.Table{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a price of 2147483647, not 2.147483647e+09
	if err := dec.Decode(table); err != nil {
		return fmt.Errorf("decoding the %s table: %w", resource, err)
	}
	if len(table.Rows) == 0 {
		fmt.Fprintf(d.out, "No %s in namespace %s.\n", resource, d.namespace)
		return nil
	}
	w := tabwriter.NewWriter(d.out, 0, 8, 3, ' ', 0)
	var show []int // columns kubectl shows by default (priority 0)
	var head []string
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			show = append(show, i)
			head = append(head, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	for _, row := range table.Rows {
		var cells []string
		for _, i := range show {
			if i < len(row.Cells) {
				cells = append(cells, fmt.Sprint(nilToEmpty(row.Cells[i])))
			}
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}

func nilToEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func (d *demo) deleteExamples(ctx context.Context) error {
	for _, b := range d.examples {
		err := d.books.WebappV2().Books(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("deleting Book %s/%s: %w", b.Namespace, b.Name, err)
		default:
			fmt.Fprintf(d.out, "book.webapp.ydzs.io %q deleted\n", b.Name)
		}
	}
	return nil
}

// heading prints a step of the demo, bold on a terminal and plain otherwise
// (no control codes in logs).
func heading(s string) {
	if st, err := os.Stdout.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		fmt.Printf("\033[1m==> %s\033[0m\n", s)
		return
	}
	fmt.Printf("==> %s\n", s)
}
