// Package bundle builds berth's install.yaml from the kustomize tree under
// config/ with the kustomize Go API (krusty), as `kubectl apply -k` would,
// and pins the controller image of a release by digest.
package bundle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// ControllerImage is the controller's image name in config/manager, without
// a tag: the one container image a release replaces.
const ControllerImage = "ghcr.io/berth-dev/berth-controller"

// Options say what to build and what to change in it.
type Options struct {
	// ConfigDir is the kustomization directory, e.g. config/default.
	ConfigDir string
	// Namespace, when set, moves everything into another namespace, as an
	// overlay with `namespace:` would. Empty keeps config's (berth-system).
	Namespace string
	// Image, when set, replaces the controller image: a full reference,
	// normally REPO/berth-controller:VERSION@sha256:DIGEST.
	Image string
	// Version goes into the header of Write's output.
	Version string
}

// Resources runs kustomize on o.ConfigDir (with o.Namespace as an overlay)
// and replaces the controller image. The resources are in kustomize's
// legacy order: Namespace, CRDs, RBAC, ..., webhook configurations last.
func Resources(o Options) (resmap.ResMap, error) {
	dir, err := filepath.Abs(o.ConfigDir)
	if err != nil {
		return nil, fmt.Errorf("config directory %s: %w", o.ConfigDir, err)
	}
	if o.Namespace != "" {
		overlay, err := writeOverlay(dir, o.Namespace)
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(overlay)
		dir = overlay
	}
	opts := krusty.MakeDefaultOptions()
	// config/default asks for kustomize's legacy order (Namespace, CRDs,
	// ..., webhook configurations); unspecified keeps that and gives the
	// same order to the namespace overlay, which says nothing.
	opts.Reorder = krusty.ReorderOptionUnspecified
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", o.ConfigDir, err)
	}
	if o.Image != "" {
		if err := setImage(m, o.Image); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Build returns install.yaml: a header comment and the resources.
func Build(o Options) ([]byte, error) {
	m, err := Resources(o)
	if err != nil {
		return nil, err
	}
	body, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("encoding the bundle: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(header(o))
	buf.Write(body)
	return buf.Bytes(), nil
}

// header tells a reader of install.yaml what it is and how to apply it.
// Server-side apply, because the Workload CRD is larger than the
// last-applied annotation that client-side apply writes may be.
func header(o Options) string {
	version := o.Version
	if version == "" {
		version = "(unreleased)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# berth %s: CRDs, RBAC, webhooks and the controller, in one file.\n", version)
	if o.Image != "" {
		fmt.Fprintf(&b, "# Controller image: %s\n", o.Image)
	}
	b.WriteString("#\n# Install or upgrade:\n#   kubectl apply --server-side -f install.yaml\n")
	b.WriteString("# Uninstall (this deletes the CRDs and with them every queue and Workload):\n")
	b.WriteString("#   kubectl delete -f install.yaml\n#\n")
	b.WriteString("# Built by berth-release bundle from config/default; do not edit.\n")
	return b.String()
}

// overlayTemplate moves config/default into another namespace (the first
// verb), as config/default's own transformers do for berth-system: the
// visibility server's RoleBinding stays in kube-system and names the
// ServiceAccount in the new namespace, the controller's FlowSchema names
// it there too, and API Priority and Fairness objects and
// MutatingAdmissionPolicies stay cluster-scoped.
const overlayTemplate = `namespace: %[1]s
resources:
- %[2]s
transformers:
- |
  apiVersion: builtin
  kind: PatchTransformer
  metadata:
    name: visibility-auth-reader-in-kube-system
  patch: '[{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}, {"op": "replace", "path": "/subjects/0/namespace", "value": "%[1]s"}]'
  target:
    kind: RoleBinding
    name: berth-visibility-auth-reader
- |
  apiVersion: builtin
  kind: PatchTransformer
  metadata:
    name: controller-flowschema-names-the-namespace
  patch: '[{"op": "replace", "path": "/spec/rules/0/subjects/0/serviceAccount/namespace", "value": "%[1]s"}]'
  target:
    kind: FlowSchema
    name: berth-controller
- |
  apiVersion: builtin
  kind: PatchTransformer
  metadata:
    name: flowcontrol-cluster-scoped
  patch: '[{"op": "remove", "path": "/metadata/namespace"}]'
  target:
    group: flowcontrol.apiserver.k8s.io
- |
  apiVersion: builtin
  kind: PatchTransformer
  metadata:
    name: mutating-admission-policies-cluster-scoped
  patch: '[{"op": "remove", "path": "/metadata/namespace"}]'
  target:
    group: admissionregistration.k8s.io
    kind: MutatingAdmissionPolicy.*
`

// writeOverlay writes a kustomization that puts base into namespace and
// returns its directory.
func writeOverlay(base, namespace string) (string, error) {
	dir, err := os.MkdirTemp("", "berth-bundle-")
	if err != nil {
		return "", fmt.Errorf("creating the overlay: %w", err)
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("locating %s from the overlay: %w", base, err)
	}
	k := fmt.Sprintf(overlayTemplate, namespace, filepath.ToSlash(rel))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("writing the overlay: %w", err)
	}
	return dir, nil
}

// setImage replaces every container image named ControllerImage (any tag
// or digest) with ref. It is an edit after the build rather than
// kustomize's images transformer, because that drops the tag when it
// sets a digest, and the tag is what tells a reader which release runs.
func setImage(m resmap.ResMap, ref string) error {
	replaced := 0
	for _, r := range m.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		containers, err := r.Pipe(kyaml.Lookup("spec", "template", "spec", "containers"))
		if err != nil {
			return fmt.Errorf("%s: reading containers: %w", r.CurId(), err)
		}
		if containers == nil {
			continue
		}
		elems, err := containers.Elements()
		if err != nil {
			return fmt.Errorf("%s: reading containers: %w", r.CurId(), err)
		}
		for _, c := range elems {
			img := c.Field("image")
			if img == nil || imageName(img.Value.YNode().Value) != ControllerImage {
				continue
			}
			img.Value.YNode().Value = ref
			replaced++
		}
	}
	if replaced == 0 {
		return errors.New("no container uses " + ControllerImage + ": config/manager changed?")
	}
	return nil
}

// imageName strips the tag and digest from an image reference. A colon
// after the last slash starts a tag; one before it is a registry's port.
func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
