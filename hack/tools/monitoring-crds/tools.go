//go:build tools

// Package tools records what this module generates CRDs from, so that go mod
// tidy keeps it.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
)
