// Package importkueue converts Kueue's queueing objects — ResourceFlavors
// (with their Topologies), ClusterQueues, LocalQueues,
// WorkloadPriorityClasses, and the ProvisioningRequestConfigs their
// AdmissionChecks name — into berth's, and says what it could not map and
// why. It reads kueue.x-k8s.io v1beta1 and v1beta2 with Kueue's own API
// types and conversions.
package importkueue

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Input is what was read, in Kueue's v1beta2 form.
type Input struct {
	Flavors             []kueue.ResourceFlavor
	ClusterQueues       []kueue.ClusterQueue
	LocalQueues         []kueue.LocalQueue
	PriorityClasses     []kueue.WorkloadPriorityClass
	Topologies          []kueue.Topology
	AdmissionChecks     []kueue.AdmissionCheck
	ProvisioningConfigs []kueue.ProvisioningRequestConfig
	Cohorts             []kueue.Cohort
}

// Decoder reads Kueue objects.
type Decoder struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
}

// NewDecoder returns a Decoder of kueue.x-k8s.io v1beta1 and v1beta2.
func NewDecoder() (*Decoder, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kueuev1beta1.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("registering Kueue's API: %w", err)
		}
	}
	return &Decoder{scheme: s, codecs: serializer.NewCodecFactory(s)}, nil
}

// Decode reads a stream of YAML or JSON documents (a List is read item by
// item) and adds the Kueue objects to in. What is not a Kueue object it
// maps (another kind, or another API group) is returned as Unmapped; a
// document that is not valid is an error naming it.
func (d *Decoder) Decode(r io.Reader, source string, in *Input) ([]Unmapped, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var skipped []Unmapped
	for doc := 1; ; doc++ {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return skipped, nil
		}
		if err != nil {
			return skipped, fmt.Errorf("%s, document %d: %w", source, doc, err)
		}
		if len(u.Object) == 0 {
			continue // an empty document between ---
		}
		items := []unstructured.Unstructured{*u}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return skipped, fmt.Errorf("%s, document %d: %w", source, doc, err)
			}
			items = list.Items
		}
		for i := range items {
			s, err := d.add(&items[i], in)
			if err != nil {
				return skipped, fmt.Errorf("%s, document %d (%s %s): %w", source, doc, items[i].GetKind(), items[i].GetName(), err)
			}
			skipped = append(skipped, s...)
		}
	}
}

// add converts one object to v1beta2 and files it.
func (d *Decoder) add(u *unstructured.Unstructured, in *Input) ([]Unmapped, error) {
	gvk := u.GroupVersionKind()
	if gvk.Group != kueue.GroupVersion.Group {
		return []Unmapped{{Kind: gvk.Kind, Name: u.GetName(), Reason: "not a Kueue object (" + u.GetAPIVersion() + "); left out"}}, nil
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	obj, _, err := d.codecs.UniversalDecoder(kueue.GroupVersion).Decode(raw, nil, nil)
	if err != nil {
		return []Unmapped{{Kind: gvk.Kind, Name: u.GetName(), Reason: fmt.Sprintf("not read: %v", err)}}, nil
	}
	switch o := obj.(type) {
	case *kueue.ResourceFlavor:
		in.Flavors = append(in.Flavors, *o)
	case *kueue.ClusterQueue:
		in.ClusterQueues = append(in.ClusterQueues, *o)
	case *kueue.LocalQueue:
		in.LocalQueues = append(in.LocalQueues, *o)
	case *kueue.WorkloadPriorityClass:
		in.PriorityClasses = append(in.PriorityClasses, *o)
	case *kueue.Topology:
		in.Topologies = append(in.Topologies, *o)
	case *kueue.AdmissionCheck:
		in.AdmissionChecks = append(in.AdmissionChecks, *o)
	case *kueue.ProvisioningRequestConfig:
		in.ProvisioningConfigs = append(in.ProvisioningConfigs, *o)
	case *kueue.Cohort:
		in.Cohorts = append(in.Cohorts, *o)
	default:
		return []Unmapped{{Kind: gvk.Kind, Name: u.GetName(), Reason: "berth has no counterpart of this Kueue kind; left out"}}, nil
	}
	return nil, nil
}
