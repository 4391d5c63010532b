//go:build tools

// Package tools pins the linter the tests build, so `go mod tidy` keeps it.
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint"
)
