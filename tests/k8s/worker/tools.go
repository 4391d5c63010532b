//go:build tools

// Package tools pins the upstream worker-operator the tests build, so `go mod tidy` keeps it.
package tools

import (
	_ "github.com/kubeslice/worker-operator"
)
