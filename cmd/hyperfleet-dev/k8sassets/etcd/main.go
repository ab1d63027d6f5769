// Command etcd is etcd's server built from the Go module proxy, for envtest's kube-apiserver.
package main

import (
	"go.etcd.io/etcd/server/v3/etcdmain"
	"os"
)

func main() {
	etcdmain.Main(os.Args)
}
