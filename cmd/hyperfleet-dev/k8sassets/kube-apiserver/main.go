// Command kube-apiserver is Kubernetes' API server built from the Go module proxy, for envtest: the release buckets
// that setup-envtest downloads from are not reachable from our build machines.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"os"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
