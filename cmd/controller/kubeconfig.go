package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// userAgent identifies us in the API server's audit log and metrics.
const userAgent = "book-controller"

// restConfig builds the client configuration from --kubeconfig, then
// $KUBECONFIG, then the in-cluster service account, and says in one sentence
// what is wrong when none works.
func restConfig(o *options) (*rest.Config, error) {
	path := o.kubeconfig
	if path == "" {
		path = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	var cfg *rest.Config
	var err error
	if path == "" && o.master == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, errors.New("no kubeconfig given and not running in a cluster: pass --kubeconfig PATH (or set KUBECONFIG)")
		}
	} else {
		if path != "" {
			if _, statErr := os.Stat(path); errors.Is(statErr, fs.ErrNotExist) {
				return nil, fmt.Errorf("kubeconfig %q does not exist: pass --kubeconfig with the path of an existing file", path)
			}
		}
		cfg, err = clientcmd.BuildConfigFromFlags(o.master, path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %q is not usable (%v): fix the file or pass another with --kubeconfig", path, err)
		}
	}
	cfg.UserAgent = userAgent
	cfg.QPS = o.qps
	cfg.Burst = o.burst
	return cfg, nil
}
