// Command berth-images builds and pushes the OCI images of berth's two
// binaries, berth-controller and berth-autoscaler, from Go alone: no Docker,
// no base image pulled, no registry needed until the push.
//
// Each image is two layers on nothing: one with a CA bundle, /etc/passwd and
// /etc/group naming the nonroot user (65532) and an empty /tmp; one with the
// statically linked binary. That is all a controller which only talks HTTPS
// to the apiserver needs, and it leaves no shell or package manager for an
// attacker to use. The layers are written with fixed timestamps and sorted
// entries, so two builds of the same source give the same digests.
//
// Usage:
//
//	berth-images build --source DIR --out DIR --version VERSION --repo REPO [--platforms linux/amd64,linux/arm64] [--commit SHA]
//	berth-images push --oci DIR --repo REPO --version VERSION
//
// `make images` and `make push-images` run it; docs/operating.md describes
// the output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

// binaries are the commands under ./cmd that ship as images, in the order
// they are built and reported.
var binaries = []string{"berth-controller", "berth-autoscaler"}

const usage = `usage:
  berth-images build --source DIR --out DIR --version VERSION --repo REPO [--platforms linux/amd64,linux/arm64] [--commit SHA] [--ca-certs FILE]
  berth-images push --oci DIR --repo REPO --version VERSION
`

// errUsage marks a command line that could not be understood; main prints
// the usage for it rather than just the error.
var errUsage = errors.New("bad usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-images:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run dispatches to a subcommand; out receives the summary.
func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no subcommand", errUsage)
	}
	switch args[0] {
	case "build":
		o, err := parseBuildFlags(args[1:])
		if err != nil {
			return err
		}
		return build(ctx, o, goBuild, out)
	case "push":
		o, err := parsePushFlags(args[1:])
		if err != nil {
			return err
		}
		return push(ctx, o, out)
	case "help", "-h", "--help":
		_, err := fmt.Fprint(out, usage)
		return err
	default:
		return fmt.Errorf("%w: unknown subcommand %q", errUsage, args[0])
	}
}

// parseFlags parses a subcommand's flags without flag's own usage output,
// so that errors surface once, through main.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %s: %w", errUsage, fs.Name(), err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s: unexpected arguments %q", errUsage, fs.Name(), fs.Args())
	}
	return nil
}

// required reports the first empty flag among names, in a usage error.
func required(fs *flag.FlagSet, names ...string) error {
	for _, n := range names {
		if fs.Lookup(n).Value.String() == "" {
			return fmt.Errorf("%w: %s: --%s is required", errUsage, fs.Name(), n)
		}
	}
	return nil
}
