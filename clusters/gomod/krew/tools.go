//go:build tools

// Package tools pins krew, which installs the release's krew manifest and archive in
// tests/local/test_release_assets.py as a user's `kubectl krew install` would.
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
