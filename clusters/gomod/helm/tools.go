//go:build tools

// Package tools pins the helm command the bed and `./run test` use (chart lint and render).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
