// Command kubectl-berth is berth's kubectl plugin: `kubectl berth ...`.
// Install it on the PATH (or with krew) and run `kubectl berth --help`.
package main

import (
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/berth-dev/berth/cmd/kubectl-berth/commands"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := commands.NewRoot(streams).Execute(); err != nil {
		os.Exit(1)
	}
}
