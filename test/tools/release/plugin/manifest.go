package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// krewGroup is the API group of krew's Plugin manifests.
const krewGroup = "krew.googlecontainertools.github.com/"

// generatedComment heads the rendered manifest in place of the template's.
const generatedComment = `krew plugin manifest for kubectl-berth, rendered by berth-release plugin
(make plugin) from config/krew/berth.yaml: edit that, not this.`

// platform is one entry of the manifest's spec.platforms.
type platform struct {
	Selector struct {
		MatchLabels struct {
			OS   string `yaml:"os"`
			Arch string `yaml:"arch"`
		} `yaml:"matchLabels"`
	} `yaml:"selector"`
	URI    string `yaml:"uri"`
	SHA256 string `yaml:"sha256"`
	Bin    string `yaml:"bin"`
}

// Render fills the krew manifest template for version: spec.version, and
// spec.platforms with one entry per archive (its selector, its URL under
// baseURL (DefaultBaseURL when empty), its sha256 and the binary's name). Everything else of the
// template — name, descriptions, caveats, its order — is kept as written.
func Render(tmpl []byte, version, baseURL string, archives []Archive) ([]byte, error) {
	doc, err := parseTemplate(tmpl)
	if err != nil {
		return nil, err
	}
	if len(archives) == 0 {
		return nil, errors.New("no archive to list in the manifest")
	}
	if baseURL == "" {
		baseURL = DefaultBaseURL(version)
	}
	root := doc.Content[0]
	spec := mapValue(root, "spec")
	setValue(spec, "version", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: version})
	entries := make([]platform, 0, len(archives))
	for _, a := range archives {
		var e platform
		e.Selector.MatchLabels.OS, e.Selector.MatchLabels.Arch = a.Platform.OS, a.Platform.Arch
		e.URI = strings.TrimSuffix(baseURL, "/") + "/" + a.Platform.ArchiveName(version)
		e.SHA256, e.Bin = a.SHA256, a.Platform.Bin()
		entries = append(entries, e)
	}
	var platforms yaml.Node
	if err := platforms.Encode(entries); err != nil {
		return nil, fmt.Errorf("encoding the platforms: %w", err)
	}
	for _, e := range platforms.Content {
		// {os: linux, arch: amd64}, as krew's own manifests write it, and
		// every sum quoted alike (one of digits only must be, to stay a
		// string).
		mapValue(mapValue(e, "selector"), "matchLabels").Style = yaml.FlowStyle
		mapValue(e, "sha256").Style = yaml.DoubleQuotedStyle
	}
	setValue(spec, "platforms", &platforms)
	// The template's comment describes the template.
	doc.HeadComment, root.HeadComment, root.Content[0].HeadComment = generatedComment, "", ""
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	return out.Bytes(), nil
}

// parseTemplate reads the template and checks that it is a krew Plugin
// with a spec to fill.
func parseTemplate(tmpl []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(tmpl, &doc); err != nil {
		return nil, fmt.Errorf("parsing the krew manifest template: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode || len(doc.Content[0].Content) == 0 {
		return nil, errors.New("the krew manifest template is not one YAML mapping")
	}
	root := doc.Content[0]
	api, kind := mapValue(root, "apiVersion"), mapValue(root, "kind")
	if api == nil || !strings.HasPrefix(api.Value, krewGroup) || kind == nil || kind.Value != "Plugin" {
		return nil, fmt.Errorf("the krew manifest template is not a %sPlugin", krewGroup)
	}
	if spec := mapValue(root, "spec"); spec == nil || spec.Kind != yaml.MappingNode {
		return nil, errors.New("the krew manifest template has no spec mapping")
	}
	return &doc, nil
}

// mapValue returns the value of key in mapping m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// setValue sets key of mapping m to v, in place when m has it, else last.
func setValue(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}
