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
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusesAnUnexpectedCRD: a CRD without the two versions the markers
// should give fails with one line naming the markers, and writes nothing.
func TestRefusesAnUnexpectedCRD(t *testing.T) {
	for name, crd := range map[string]string{
		"v1 alone":  "spec:\n  versions:\n  - name: v1\n    storage: true\n",
		"v1 stored": "spec:\n  versions:\n  - name: v1\n    storage: true\n  - name: v2\n",
		"no spec":   "kind: CustomResourceDefinition\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.yaml")
			if err := os.WriteFile(in, []byte(crd), 0o644); err != nil {
				t.Fatal(err)
			}
			err := run(in, dir)
			if err == nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line", err)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "crd*.yaml")); len(files) > 0 {
				t.Errorf("wrote %v despite the error", files)
			}
		})
	}
}
