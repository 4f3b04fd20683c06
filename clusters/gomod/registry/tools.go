//go:build tools

// Package tools pins the CNCF Distribution registry, which serves on loopback the OCI registry
// the release's chart is pushed to and installed from in tests/local/test_release_assets.py.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
