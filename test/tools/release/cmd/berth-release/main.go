// Command berth-release builds berth's installable release from the
// repository: the kustomize bundle (install.yaml) and the Helm chart, both
// pinned to the controller image a release built, and kubectl-berth's krew
// archives and manifest; and it renders the chart as an install test
// applies it. `make generate` also runs it, to write the chart's templates
// for what controller-gen generates.
//
// Usage:
//
//	berth-release bundle --config DIR --version V (--image REF | --images DIR [--image-repo REPO]) --out FILE
//	berth-release chart --chart DIR --version V (--image-digest D | --images DIR) [--image-repo REPO] --out DIR
//	berth-release render --chart DIR|TGZ --namespace NS --release NAME [-f FILE]... [--set K=V]... --out FILE
//	berth-release generate --config DIR --chart DIR
//	berth-release plugin --source DIR --version V [--platforms OS/ARCH,...] [--base-url URL] --out DIR
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

const usage = `usage:
  berth-release bundle --config DIR --version V (--image REF | --images DIR [--image-repo REPO]) [--namespace NS] --out FILE
  berth-release chart --chart DIR --version V (--image-digest D | --images DIR) [--image-repo REPO] --out DIR
  berth-release render --chart DIR|TGZ [--namespace NS] [--release NAME] [-f FILE]... [--set K=V]... [--api-versions G/V]... [--out FILE]
  berth-release generate --config DIR --chart DIR
  berth-release plugin --source DIR --version V [--template FILE] [--platforms OS/ARCH,...] [--base-url URL] [--commit C] --out DIR
`

// errUsage marks a command line that could not be understood; main prints
// the usage for it rather than just the error.
var errUsage = errors.New("bad usage")

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "berth-release:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// run dispatches to a subcommand; out receives what it reports.
func run(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: no subcommand", errUsage)
	}
	cmds := map[string]func([]string, io.Writer) error{
		"bundle":   runBundle,
		"chart":    runChart,
		"render":   runRender,
		"generate": runGenerate,
		"plugin":   runPlugin,
	}
	if cmd, ok := cmds[args[0]]; ok {
		return cmd(args[1:], out)
	}
	switch args[0] {
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

// multiFlag collects a flag given more than once (-f, --set).
type multiFlag []string

func (m *multiFlag) String() string { return strings.Join(*m, ",") }

func (m *multiFlag) Set(v string) error {
	*m = append(*m, v)
	return nil
}

// readDigest reads the controller image's digest that `make images` wrote
// into dir: one line, sha256:<hex>.
func readDigest(dir string) (string, error) {
	path := filepath.Join(dir, "berth-controller.digest")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the image digest (run make images first): %w", err)
	}
	d := strings.TrimSpace(string(b))
	if !strings.HasPrefix(d, "sha256:") || strings.ContainsAny(d, " \n") {
		return "", fmt.Errorf("%s: want one line sha256:<hex>, got %q", path, d)
	}
	return d, nil
}

// writeOutput writes data to path, creating its directory; "-" or ""
// writes to out.
func writeOutput(path string, data []byte, out io.Writer) error {
	if path == "" || path == "-" {
		_, err := out.Write(data)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
