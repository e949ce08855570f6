// The etcd of the real-apiserver test fixture: upstream's etcdmain, built from the published
// go.etcd.io/etcd/server/v3 module (its own go.mod has replace lines, so `go install` refuses it;
// as a dependency of this module it resolves). Kept apart from the kube-apiserver module so that
// neither raises the other's dependencies.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
