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
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// writeServiceAccountKey writes the RSA key that kube-apiserver signs service
// account tokens with and kube-controller-manager signs legacy token secrets
// with. An existing key is kept, so that tokens issued before a restart on
// the same data stay valid.
func writeServiceAccountKey(path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("localcluster: generating service account key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// tokens are static bearer tokens for kube-apiserver's --token-auth-file.
// Static tokens avoid a client certificate authority, which this package
// would otherwise have to create and keep.
type tokens struct {
	Admin             string `json:"admin"`
	ControllerManager string `json:"controllerManager"`
	// fork:begin node
	// Scheduler and Node (the kubelet's, system:node:127.0.0.1 in
	// system:nodes, for the Node authorizer) are used only with
	// Options.Node; tokens.json files written before they existed lack them.
	Scheduler string `json:"scheduler,omitempty"`
	Node      string `json:"node,omitempty"`
	// fork:end node
}

// all are the tokens, each of which must be set.
func (t *tokens) all() []*string {
	return []*string{
		&t.Admin, &t.ControllerManager,
		// fork:begin node
		&t.Scheduler, &t.Node,
		// fork:end node
	}
}

// loadOrCreateTokens keeps tokens across restarts on the same data for the
// same reason as the service account key: kubeconfigs already handed out must
// keep working.
func loadOrCreateTokens(path string) (tokens, error) {
	var t tokens
	err := readJSON(path, &t)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return t, err
	}
	complete := err == nil
	for _, tok := range t.all() {
		complete = complete && *tok != ""
	}
	if complete {
		return t, nil
	}
	for _, tok := range t.all() {
		if *tok == "" {
			*tok = randomToken()
		}
	}
	return t, writeJSON(path, t, 0o600)
}

// tokenAuthFile is the CSV that kube-apiserver reads: token,user,uid,"groups".
// Both users are in system:masters: this is a local, single-user cluster and
// the controller manager must be able to act on every resource it collects.
// The kubelet's user is what the Node authorizer expects of node 127.0.0.1. // fork:line node
func (t tokens) tokenAuthFile() []byte {
	file := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n%s,system:kube-controller-manager,kube-controller-manager,\"system:masters\"\n",
		t.Admin, t.ControllerManager)
	// fork:begin node
	file += fmt.Sprintf("%s,system:kube-scheduler,kube-scheduler,\"system:masters\"\n%s,system:node:%s,kubelet,\"system:nodes\"\n",
		t.Scheduler, t.Node, nodeName)
	// fork:end node
	return []byte(file)
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b)
}
