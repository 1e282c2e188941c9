package commands

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/berth-dev/berth/cmd/internal/buildinfo"
)

func newVersion(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kubectl-berth's version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(e.streams.Out, buildinfo.Get().String("kubectl-berth"))
			return err
		},
	}
}
