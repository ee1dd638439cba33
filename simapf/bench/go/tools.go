//go:build tools

// The apiserver's command, required here so that `go mod tidy` keeps every module it needs:
// simapf builds it from this module (simapf/bench/build.py).
package bench

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
