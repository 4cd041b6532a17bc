//go:build tools

// Package lint pins golangci-lint, which `make lint` builds from the Go
// module proxy into .cache/tools. It is its own module, outside go.work, so
// the linter's dependencies never steer the services'.
package lint

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
