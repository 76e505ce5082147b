//go:build tools

// Package tools pins kube-apiserver's build: the tests that need a real Kubernetes API server
// start the binary that build.sh makes from this module. The import keeps go mod tidy from
// dropping the requirement.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver/app"
