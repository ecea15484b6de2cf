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
	"encoding/json"
	"os"
	"path/filepath"
)

// state is what a detached cluster leaves in <Dir>/cluster.json so that a
// later process (hack/local-up.sh down or status) can find and stop it.
type state struct {
	BinDir                string   `json:"binDir"`
	Detached              bool     `json:"detached"`
	EtcdClientPort        int      `json:"etcdClientPort"`
	EtcdPeerPort          int      `json:"etcdPeerPort"`
	APIServerPort         int      `json:"apiServerPort"`
	ControllerManagerPort int      `json:"controllerManagerPort"`
	AuditLog              bool     `json:"auditLog,omitempty"`
	ShardedListAndWatch   bool     `json:"shardedListAndWatch,omitempty"`
	APIServerArgs         []string `json:"apiServerArgs,omitempty"`
	EtcdArgs              []string `json:"etcdArgs,omitempty"`
	// fork:begin node
	Node *nodeState `json:"node,omitempty"`
	// fork:end node
	Processes map[string]procID `json:"processes"`
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// writeJSON replaces path atomically so that a reader never sees half a file.
func writeJSON(path string, v any, mode os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
