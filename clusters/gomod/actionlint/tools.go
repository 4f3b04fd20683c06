//go:build tools

// Package tools pins the actionlint command `./run test` checks the release workflow with.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
