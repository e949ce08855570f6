// The kubectl of the project's kubectl probe, for a machine that has none: upstream's own
// command, built from the published k8s.io/kubectl module (its command package is kubectl's
// whole command line). Keep this module free of any other code, so that version selection cannot
// raise kubectl's pinned dependencies.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		// Printed as kubectl prints it, with its exit code.
		util.CheckErr(err)
	}
}
