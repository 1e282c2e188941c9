package setup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/jobs/serving"
)

// TestSamplesDecode keeps config/samples in step with the API types: every
// document of every sample decodes strictly (no unknown fields) into a type
// berth knows.
func TestSamplesDecode(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, berthv1.AddToScheme, AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r := yaml.NewYAMLReader(bufioReader(raw))
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("reading: %v", err)
				}
				if len(bytes.TrimSpace(doc)) == 0 {
					continue
				}
				obj, _, err := decoder.Decode(doc, nil, nil)
				if err != nil {
					t.Errorf("decoding: %v", err)
					continue
				}
				if err := admitSample(obj); err != nil {
					t.Errorf("berth's webhook refuses it: %v", err)
				}
			}
		})
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// admitSample runs berth's validators of the kinds whose samples they
// would refuse at the API server (a whole-set StatefulSet without
// podManagementPolicy Parallel, say), and checks that a serving sample is
// queued at all.
func admitSample(obj runtime.Object) error {
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		_, err = serving.DeploymentValidator{}.ValidateCreate(ctx, o)
		if _, ok := o.Labels[berthv1.QueueNameLabel]; !ok && err == nil {
			err = errors.New("a Deployment sample without " + berthv1.QueueNameLabel)
		}
	case *appsv1.StatefulSet:
		_, err = serving.StatefulSetValidator{}.ValidateCreate(ctx, o)
		if _, ok := o.Labels[berthv1.QueueNameLabel]; !ok && err == nil {
			err = errors.New("a StatefulSet sample without " + berthv1.QueueNameLabel)
		}
	}
	return err
}
