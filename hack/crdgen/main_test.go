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
		"v1 stored": "spec:\n  versions:\n  - name: v1\n    storage: true\n    deprecated: true\n  - name: v2\n",
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
