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

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"ydzs.io/book-controller/pkg/manager"
)

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
	if err := checkServerAddress(cfg, o.master); err != nil {
		return nil, err
	}
	// The manager appends the replica's identity, so that the API server's
	// audit log names the replica behind every request.
	cfg.UserAgent = manager.DefaultUserAgent + "/" + version()
	cfg.QPS = o.qps
	cfg.Burst = o.burst
	return cfg, nil
}

// checkServerAddress rejects an API server address client-go could not use,
// naming where it came from; otherwise the first request fails with a bare
// URL parse error.
func checkServerAddress(cfg *rest.Config, master string) error {
	source := "the kubeconfig's server"
	fix := "fix the cluster's server in the kubeconfig"
	if master != "" {
		source, fix = "--master", "pass a URL such as https://host:6443"
	}
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err == nil && u.Scheme != "http" && u.Scheme != "https" {
		err = fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if err != nil {
		return fmt.Errorf("%s %q is not a valid API server address (%v): %s", source, cfg.Host, err, fix)
	}
	return nil
}
