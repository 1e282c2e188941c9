package jobs

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
)

func queued(q string) map[string]string { return map[string]string{berthv1.QueueNameLabel: q} }

func workload(conds ...string) *berthv1.Workload {
	wl := &berthv1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-a-1"}}
	for _, c := range conds {
		wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
	}
	if len(conds) > 0 && conds[0] == berthv1.ConditionQuotaReserved {
		wl.Status.Admission = &berthv1.Admission{ClusterQueue: "cq"}
	}
	return wl
}

func messages(errs field.ErrorList) string { return errs.ToAggregate().Error() }

func TestValidateQueueName(t *testing.T) {
	tests := []struct {
		name, value string
		ok          bool
	}{
		{"a LocalQueue name", "team-a", true},
		{"dots are allowed in object names", "team.a", true},
		{"empty", "", false},
		{"another namespace's queue", "other/team-a", false},
		{"upper case", "Team", false},
		{"trailing dash", "team-", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateQueueName(queued(tt.value))
			if (len(errs) == 0) != tt.ok {
				t.Fatalf("ValidateQueueName(%q) = %v, want ok=%v", tt.value, errs, tt.ok)
			}
			if !tt.ok && !strings.Contains(messages(errs), "must be the name of a LocalQueue in the job's own namespace") {
				t.Errorf("message does not say what to fix: %s", messages(errs))
			}
		})
	}
	if errs := ValidateQueueName(map[string]string{}); len(errs) != 0 {
		t.Errorf("a job without the label is not berth's: %v", errs)
	}
}

func TestValidateQueueNameUpdate(t *testing.T) {
	tests := []struct {
		name     string
		old, new map[string]string
		wl       *berthv1.Workload
		want     string
	}{
		{name: "unchanged", old: queued("a"), new: queued("a"), wl: workload()},
		{name: "changed before the Workload exists", old: queued("a"), new: queued("b")},
		{name: "changed after the job finished", old: queued("a"), new: queued("b"), wl: workload(berthv1.ConditionFinished)},
		{name: "label added", old: map[string]string{}, new: queued("a"), wl: workload()},
		{name: "changed while queued", old: queued("a"), new: queued("b"), wl: workload(), want: "cannot be changed while berth holds workload job-a-1"},
		{name: "removed while admitted", old: queued("a"), new: map[string]string{}, wl: workload(berthv1.ConditionQuotaReserved, berthv1.ConditionAdmitted),
			want: "cannot be removed while berth holds workload job-a-1 for this job in queue \"a\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateQueueNameUpdate(tt.old, tt.new, tt.wl)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs)
				}
				return
			}
			if !strings.Contains(messages(errs), tt.want) {
				t.Fatalf("got %v, want a refusal containing %q", errs, tt.want)
			}
		})
	}
}

func TestValidateResume(t *testing.T) {
	path := field.NewPath("spec", "suspend")
	admitted := workload(berthv1.ConditionQuotaReserved, berthv1.ConditionAdmitted)
	tests := []struct {
		name             string
		was, now         bool
		wl               *berthv1.Workload
		refused          bool
		wantWorkloadName string
	}{
		{name: "stays suspended", was: true, now: true, wl: workload()},
		{name: "admitted", was: true, now: false, wl: admitted},
		{name: "was running", was: false, now: false, wl: workload()},
		{name: "queued", was: true, now: false, wl: workload(), refused: true, wantWorkloadName: "job-a-1"},
		{name: "no Workload yet", was: true, now: false, refused: true, wantWorkloadName: "(not created yet)"},
		{name: "evicted", was: true, now: false, wl: workload(berthv1.ConditionQuotaReserved, berthv1.ConditionAdmitted, berthv1.ConditionEvicted), refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateResume(tt.was, tt.now, tt.wl, path)
			if (len(errs) > 0) != tt.refused {
				t.Fatalf("got %v, want refused=%v", errs, tt.refused)
			}
			if tt.refused && !strings.Contains(messages(errs), "berth holds this job until its workload "+tt.wantWorkloadName) {
				t.Errorf("message: %s", messages(errs))
			}
		})
	}
}
