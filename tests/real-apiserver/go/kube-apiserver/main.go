// The kube-apiserver of the real-apiserver test fixture: upstream's own command, built from the
// published k8s.io/kubernetes module. go.mod is generated (cargo xtask real-apiserver regenerate):
// it pins k8s.io/kubernetes and replaces every staging module with its matching v0.x tag. Keep
// this module free of any other code, so that version selection cannot raise Kubernetes' pinned
// dependencies.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
