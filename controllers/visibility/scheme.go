package visibility

import (
	"fmt"
	"net/url"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	visv1 "github.com/berth-dev/berth/apis/visibility/v1alpha1"
)

// codecs is the API's scheme with its serializers and query-parameter codec.
type codecs struct {
	scheme *runtime.Scheme
	codecs serializer.CodecFactory
	params runtime.ParameterCodec
}

func newCodecs() (codecs, error) {
	s := runtime.NewScheme()
	if err := visv1.AddToScheme(s); err != nil {
		return codecs{}, fmt.Errorf("registering visibility types: %w", err)
	}
	if err := s.SetVersionPriority(visv1.GroupVersion); err != nil {
		return codecs{}, fmt.Errorf("setting version priority: %w", err)
	}
	// What every API server serves about itself (discovery, Status).
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	s.AddUnversionedTypes(schema.GroupVersion{Version: "v1"}, &metav1.Status{}, &metav1.APIVersions{},
		&metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	if err := s.AddConversionFunc((*url.Values)(nil), (*visv1.PendingWorkloadOptions)(nil), convertOptions); err != nil {
		return codecs{}, fmt.Errorf("registering query conversion: %w", err)
	}
	return codecs{scheme: s, codecs: serializer.NewCodecFactory(s), params: runtime.NewParameterCodec(s)}, nil
}

// convertOptions reads offset, limit and workload from a query; an offset
// or limit that is not a non-negative integer is an error the client sees
// as a bad request. The workload is checked where the queue's scope is
// known (pending.Get).
func convertOptions(a, b any, _ conversion.Scope) error {
	q, out := a.(*url.Values), b.(*visv1.PendingWorkloadOptions)
	out.Workload = q.Get("workload")
	for name, dst := range map[string]*int64{"offset": &out.Offset, "limit": &out.Limit} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("query parameter %s=%q: want a non-negative integer", name, v)
		}
		*dst = n
	}
	return nil
}
