//go:build tools

// Package tools pins the Helm CLI the tests build, so `go mod tidy` keeps it.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
