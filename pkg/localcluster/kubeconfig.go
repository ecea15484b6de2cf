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

package localcluster

import (
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for one user. The CA is embedded, not
// referenced, so the file keeps working when copied elsewhere, and TLS is
// verified rather than skipped.
func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: user}
	cfg.CurrentContext = "local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("localcluster: writing %s: %w", path, err)
	}
	return os.Chmod(path, 0o600) // it holds a system:masters token
}

// writeKubeconfigs reads the CA that the apiserver wrote on its first start
// and writes the admin and controller manager kubeconfigs with it.
func (c *Cluster) writeKubeconfigs() error {
	ca, err := os.ReadFile(c.apiServerCAFile())
	if err != nil {
		return fmt.Errorf("localcluster: kube-apiserver wrote no serving certificate: %w", err)
	}
	c.ca = ca
	if err := writeKubeconfig(c.path(adminKubeconfig), c.apiServerURL(), ca, "admin", c.tokens.Admin); err != nil {
		return err
	}
	return writeKubeconfig(c.path(controllerManagerKubeconfig), c.apiServerURL(), ca, "system:kube-controller-manager", c.tokens.ControllerManager)
}

func (c *Cluster) restConfig() *rest.Config {
	return &rest.Config{
		Host:            c.apiServerURL(),
		BearerToken:     c.tokens.Admin,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), c.ca...)},
	}
}
