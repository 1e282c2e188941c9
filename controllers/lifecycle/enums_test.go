package lifecycle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/admission"
	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

// roundTrip is one API enum: its values as apis/ lists them, and whether
// each converts to the engine and back unchanged.
type roundTrip struct {
	values []string
	check  func(v string) (engine string, explicit, back bool)
}

func tableTrip[A, E ~string](values []A, t enumTable[A, E]) roundTrip {
	rt := roundTrip{check: func(v string) (string, bool, bool) {
		_, explicit := t[A(v)]
		e := t.engine(A(v))
		return string(e), explicit, t.api(e) == A(v)
	}}
	for _, v := range values {
		rt.values = append(rt.values, string(v))
	}
	return rt
}

// enumTrips lists every API enum the engine reads, by type name.
func enumTrips() map[string]roundTrip {
	return map[string]roundTrip{
		"QueueingStrategy":    tableTrip(berthv1.QueueingStrategies(), queueingStrategies),
		"PreemptionMode":      tableTrip(berthv1.PreemptionModes(), preemptionModes),
		"TopologyMode":        tableTrip(berthv1.TopologyModes(), topologyModes),
		"ProvisioningMode":    tableTrip(berthv1.ProvisioningModes(), provisioningModes),
		"SinglePodJobsPolicy": tableTrip(berthv1.SinglePodJobsPolicies(), singlePodJobs),
		"ProvisioningState":   tableTrip(berthv1.ProvisioningStates(), bookingStates),
		"ProvisioningClass":   tableTrip(berthv1.ProvisioningClasses(), classes),
	}
}

// notEngine lists the API enums that have no engine counterpart, and why.
var notEngine = map[string]string{
	"StopPolicy":           "the engine knows only whether a queue admits: Stopped, tested below",
	"WorkloadReason":       "written by the lifecycle; the engine's pending reasons map onto it (reasons.go)",
	"FailureKind":          "notification policies; the engine never reads them",
	"NotificationSinkType": "notification policies; the engine never reads them",
	"HeadroomMode":         "headroom policies are sized by controllers/headroom; the engine never reads them",
}

// TestEnumsRoundTrip: every value of every API enum the engine reads has an
// explicit engine value and reads back as itself.
func TestEnumsRoundTrip(t *testing.T) {
	for name, rt := range enumTrips() {
		for _, v := range rt.values {
			t.Run(name+"/"+v, func(t *testing.T) {
				e, explicit, back := rt.check(v)
				if !explicit || e == "" {
					t.Errorf("%s %q has no engine value", name, v)
				}
				if !back {
					t.Errorf("%s %q -> engine %q does not read back", name, v, e)
				}
			})
		}
	}
}

func TestStopped(t *testing.T) {
	want := map[berthv1.StopPolicy]bool{berthv1.StopPolicyNone: false, berthv1.StopPolicyHold: true, berthv1.StopPolicyHoldAndDrain: true, "": false}
	for _, p := range append(berthv1.StopPolicies(), "") {
		if got, ok := want[p]; !ok || Stopped(p) != got {
			t.Errorf("Stopped(%q) = %v, want %v (listed %v)", p, Stopped(p), got, ok)
		}
	}
}

// TestProvisioningClassIsTheAutoscalers: the API's classes are written
// onto ProvisioningRequests as they are, so they must be
// cluster-autoscaler's names, and an unknown class books what exists.
func TestProvisioningClassIsTheAutoscalers(t *testing.T) {
	for _, tc := range []struct {
		class berthv1.ProvisioningClass
		want  string
	}{
		{berthv1.ProvisioningClassCheckCapacity, "check-capacity.autoscaling.x-k8s.io"},
		{berthv1.ProvisioningClassAtomicScaleUp, "best-effort-atomic-scale-up.autoscaling.x-k8s.io"},
	} {
		if string(tc.class) != tc.want {
			t.Errorf("class %q, want %q", tc.class, tc.want)
		}
	}
	if got := ClassToAPI(ClassToEngine("queued-provisioning.gke.io")); got != berthv1.ProvisioningClassCheckCapacity {
		t.Errorf("a foreign class reads as %q", got)
	}
}

// TestEnumsComplete: the constants declared in apis/ for each string enum
// are exactly the values its list function returns, and every such enum
// either converts (enumTrips) or is listed in notEngine. Adding a value or
// an enum to apis/ without a conversion fails here.
func TestEnumsComplete(t *testing.T) {
	declared := declaredEnums(t, "../../apis/v1alpha1")
	trips := enumTrips()
	for typ, consts := range declared {
		rt, ok := trips[typ]
		if !ok {
			if _, skip := notEngine[typ]; !skip {
				t.Errorf("API enum %s has no conversion to the engine (add it to enumTrips) and is not in notEngine", typ)
			}
			continue
		}
		listed := slices.Clone(rt.values)
		sort.Strings(listed)
		if !slices.Equal(consts, listed) {
			t.Errorf("API enum %s declares %v, its list function returns %v", typ, consts, listed)
		}
	}
	for typ := range trips {
		if _, ok := declared[typ]; !ok {
			t.Errorf("enumTrips names %s, which apis/ does not declare", typ)
		}
	}
	if got, ok := declared["StopPolicy"]; !ok || len(got) != len(berthv1.StopPolicies()) {
		t.Errorf("StopPolicy declares %v, StopPolicies lists %v", got, berthv1.StopPolicies())
	}
}

// declaredEnums parses the package in dir and returns, for each named
// string type with typed constants, the sorted values of those constants.
func declaredEnums(t *testing.T, dir string) map[string][]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("listing %s: %d files, %v", dir, len(paths), err)
	}
	fset := token.NewFileSet()
	out := map[string][]string{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				addTypedStrings(out, s.(*ast.ValueSpec))
			}
		}
	}
	for typ := range out {
		sort.Strings(out[typ])
	}
	return out
}

// addTypedStrings adds the values of a constant spec of a named type with
// string literal values to out, under the type's name.
func addTypedStrings(out map[string][]string, vs *ast.ValueSpec) {
	id, ok := vs.Type.(*ast.Ident)
	if !ok || len(vs.Values) != len(vs.Names) {
		return
	}
	for _, v := range vs.Values {
		if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, _ := strconv.Unquote(lit.Value)
			out[id.Name] = append(out[id.Name], s)
		}
	}
}

// TestFlavorSinglePodJobs: a flavor's singlePodJobs reaches the engine as
// written, unset staying unset (the engine's default for the mode).
func TestFlavorSinglePodJobs(t *testing.T) {
	for _, tc := range []struct {
		in   berthv1.SinglePodJobsPolicy
		want admission.SinglePodPolicy
	}{
		{"", ""},
		{berthv1.SinglePodJobsBook, admission.SinglePodBook},
		{berthv1.SinglePodJobsAutoscaler, admission.SinglePodAutoscaler},
	} {
		rf := &berthv1.ResourceFlavor{Spec: berthv1.ResourceFlavorSpec{Provisioning: &berthv1.ProvisioningPolicy{SinglePodJobs: tc.in}}}
		f := FlavorToEngine(rf)
		if f.Provisioning.SinglePodJobs != tc.want || f.Provisioning.Mode != admission.ProvisionIfNeeded {
			t.Errorf("singlePodJobs %q: engine policy %+v, want %q with mode IfNeeded", tc.in, f.Provisioning, tc.want)
		}
	}
}
