package controlplane

import (
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// flag is one parsed command-line flag; hasValue distinguishes `--x` from
// `--x=`.
type flag struct {
	name     string
	value    string
	hasValue bool
}

// parseFlag accepts only the long `--name[=value]` form, which every
// component understands, so that ExtraArgs can be merged by name.
func parseFlag(arg string) (flag, error) {
	if !strings.HasPrefix(arg, "--") || len(arg) == 2 {
		return flag{}, fmt.Errorf("extra arg %q: want --name or --name=value", arg)
	}
	name, value, hasValue := strings.Cut(arg[2:], "=")
	return flag{name: name, value: value, hasValue: hasValue}, nil
}

// argList is a command line built from the harness's defaults and a
// component's ExtraArgs: a flag named in ExtraArgs replaces every default
// value of that flag, which keeps the meaning the same for every component
// (kube's scalar flags keep the last value, its list flags append).
type argList struct {
	order  []string
	values map[string][]flag
}

func newArgList() *argList { return &argList{values: map[string][]flag{}} }

// add appends a default value for name.
func (a *argList) add(name, value string) *argList {
	if _, ok := a.values[name]; !ok {
		a.order = append(a.order, name)
	}
	a.values[name] = append(a.values[name], flag{name: name, value: value, hasValue: true})
	return a
}

// override applies extra args: the first mention of a flag drops its
// defaults, later mentions of the same flag add values.
func (a *argList) override(extra []string) error {
	seen := map[string]bool{}
	for _, arg := range extra {
		f, err := parseFlag(arg)
		if err != nil {
			return err
		}
		if _, ok := a.values[f.name]; !ok {
			a.order = append(a.order, f.name)
		}
		if !seen[f.name] {
			a.values[f.name] = nil
			seen[f.name] = true
		}
		a.values[f.name] = append(a.values[f.name], f)
	}
	return nil
}

// strings renders the command line.
func (a *argList) strings() []string {
	var out []string
	for _, name := range a.order {
		for _, f := range a.values[name] {
			if f.hasValue {
				out = append(out, "--"+f.name+"="+f.value)
			} else {
				out = append(out, "--"+f.name)
			}
		}
	}
	return out
}

// applyEnvtestArgs gives etcd and kube-apiserver the same ExtraArgs meaning
// as the other components: a named flag replaces envtest's default.
func applyEnvtestArgs(args *envtest.Arguments, extra []string) error {
	seen := map[string]bool{}
	for _, arg := range extra {
		f, err := parseFlag(arg)
		if err != nil {
			return err
		}
		switch {
		case !f.hasValue:
			args.Enable(f.name)
		case seen[f.name]:
			args.AppendNoDefaults(f.name, f.value)
		default:
			args.Set(f.name, f.value)
		}
		seen[f.name] = true
	}
	return nil
}
