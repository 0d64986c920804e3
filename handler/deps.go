//go:build esm_command_deps

// This file is never built (no build sets its tag). It names the packages of the esm command so
// that a module importing handler keeps their checksums in its go.sum (go mod tidy considers
// every build tag), which lets handler.Start run esm with "go run" inside that module. The Lambda
// binary links none of them.

package handler

import (
	_ "github.com/kinesis-esm/esm/example"
	_ "github.com/kinesis-esm/esm/internal/cli"
)
