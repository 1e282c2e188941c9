package v1alpha1

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// flavorSchema is the structural schema of the generated ResourceFlavor
// CRD, as the API server builds it.
func flavorSchema(t *testing.T) *structuralschema.Structural {
	t.Helper()
	return crdSchema(t, "../../config/crd/bases/berth.dev_resourceflavors.yaml")
}

// crdSchema is the structural schema of the generated CRD in file.
func crdSchema(t *testing.T, file string) *structuralschema.Structural {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	var props apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &props, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(&props)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProvisioningCELRules runs the CRD's own CEL rules, after its
// defaults, on spec.provisioning: what the API server accepts and the
// message it gives for what it refuses.
func TestProvisioningCELRules(t *testing.T) {
	s := flavorSchema(t)
	v := cel.NewValidator(s, true, celconfig.PerCallLimit)
	tests := []struct {
		name, provisioning string
		want               string // "" when accepted
	}{
		{name: "the mode's default", provisioning: `{}`},
		{name: "IfNeeded leaves single pods to the autoscaler", provisioning: `{mode: IfNeeded, singlePodJobs: Autoscaler}`},
		{name: "IfNeeded books single pods", provisioning: `{mode: IfNeeded, singlePodJobs: Book}`},
		{name: "unset mode defaults to IfNeeded", provisioning: `{singlePodJobs: Autoscaler}`},
		{name: "Always books single pods", provisioning: `{mode: Always, singlePodJobs: Book}`},
		{name: "Always alone", provisioning: `{mode: Always}`},
		{name: "Never ignores it", provisioning: `{mode: Never, singlePodJobs: Autoscaler}`},
		{name: "Always with Autoscaler", provisioning: `{mode: Always, singlePodJobs: Autoscaler}`,
			want: "singlePodJobs: Autoscaler contradicts mode: Always, which books capacity for every admission: set mode: IfNeeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkCEL(t, s, v, "apiVersion: berth.dev/v1alpha1\nkind: ResourceFlavor\nmetadata: {name: f}\nspec: {provisioning: "+tc.provisioning+"}\n", tc.want)
		})
	}
}

// checkCEL decodes doc as the API server does (whole numbers are
// integers), applies the schema's defaults and runs its CEL rules: with
// want "" they must accept it, else refuse it with a message containing
// want.
func checkCEL(t *testing.T, s *structuralschema.Structural, v *cel.Validator, doc, want string) {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	defaulting.Default(obj, s)
	errs, _ := v.Validate(context.Background(), field.NewPath(""), s, obj, nil, celconfig.RuntimeCELCostBudget)
	got := errs.ToAggregate()
	if want == "" {
		if got != nil {
			t.Fatalf("refused: %v", got)
		}
		return
	}
	if got == nil || !strings.Contains(got.Error(), want) {
		t.Fatalf("got %v, want %q", got, want)
	}
}
