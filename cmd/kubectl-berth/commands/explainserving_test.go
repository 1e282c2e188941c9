package commands

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	berthv1 "github.com/berth-dev/berth/apis/v1alpha1"
	"github.com/berth-dev/berth/controllers/lifecycle"
)

const servingNS = "serving"

// servingFixture builds the objects of a namespace that serves: queued and
// unqueued Deployments and StatefulSets, their ReplicaSets, pods and the
// Workloads berth made for them.
type servingFixture struct {
	objs []client.Object
	born time.Time
}

func (f *servingFixture) meta(name, uid string, lbls map[string]string, owner client.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: servingNS, Name: name, UID: types.UID(uid), Labels: lbls,
		CreationTimestamp: metav1.NewTime(f.born.Add(time.Duration(len(f.objs)) * time.Second))}
	if owner != nil {
		gvk := owner.GetObjectKind().GroupVersionKind()
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind,
			Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
	}
	return m
}

func (f *servingFixture) deployment(name, revision string, replicas int32, queued bool) *appsv1.Deployment {
	lbls := map[string]string{}
	if queued {
		lbls[berthv1.QueueNameLabel] = "serving"
	}
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: f.meta(name, "d-"+name, lbls, nil),
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}}}
	d.Annotations = map[string]string{revisionAnnotation: revision}
	f.objs = append(f.objs, d)
	return d
}

func (f *servingFixture) replicaSet(d *appsv1.Deployment, name, revision string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: f.meta(name, "rs-"+name, map[string]string{"app": d.Name}, d)}
	rs.Annotations = map[string]string{revisionAnnotation: revision}
	f.objs = append(f.objs, rs)
	return rs
}

func (f *servingFixture) statefulSet(name string, replicas int32, wholeSet bool) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: f.meta(name, "s-"+name, map[string]string{berthv1.QueueNameLabel: "serving"}, nil),
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
	if wholeSet {
		sts.Annotations = map[string]string{berthv1.GangAnnotation: berthv1.GangSet}
	}
	f.objs = append(f.objs, sts)
	return sts
}

// pod is a replica of owner: queued (labelled), gated or released, and
// marked for a swap when swapFor is set.
func (f *servingFixture) pod(owner client.Object, app, name string, queued, isGated bool, swapFor string) *corev1.Pod {
	lbls := map[string]string{"app": app}
	if queued {
		lbls[berthv1.QueueNameLabel] = "serving"
	}
	p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: f.meta(name, "p-"+name, lbls, owner),
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if isGated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: berthv1.AdmissionGate}}
		p.Status.Phase = corev1.PodPending
	}
	if swapFor != "" {
		p.Annotations = map[string]string{berthv1.SwapAnnotation: swapFor}
	}
	f.objs = append(f.objs, p)
	return p
}

// workload is the Workload berth made for owner (a pod, or a whole-set
// StatefulSet) of a gang of kind ("deployment", "statefulset"), admitted
// or waiting for quota.
func (f *servingFixture) workload(owner client.Object, kind, key string, admitted bool) {
	wl := &berthv1.Workload{ObjectMeta: f.meta(kind+"-"+key+"-1a2b3", "w-"+key, map[string]string{berthv1.JobKeyLabel: key}, owner)}
	// berth's serving Workloads are owned, not controlled, by their pod or
	// StatefulSet.
	wl.OwnerReferences[0].Controller = nil
	wl.Spec.QueueName = "serving"
	if admitted {
		wl.Status.Admission = &berthv1.Admission{ClusterQueue: "gpus"}
		wl.Status.Conditions = []metav1.Condition{
			cond(berthv1.ConditionQuotaReserved, metav1.ConditionTrue, berthv1.ReasonQuotaReserved, ""),
			cond(berthv1.ConditionAdmitted, metav1.ConditionTrue, berthv1.ReasonAdmitted, "")}
	} else {
		wl.Status.Conditions = []metav1.Condition{cond(berthv1.ConditionQuotaReserved, metav1.ConditionFalse, berthv1.ReasonInsufficientQuota,
			"insufficient quota for nvidia.com/gpu in flavor h200: requested 1, available 0")}
	}
	f.objs = append(f.objs, wl)
}

// newServingFixture is a namespace with every case the tests explain.
func newServingFixture() *servingFixture {
	f := &servingFixture{born: time.Now().Add(-time.Hour)}
	// web: two replicas, one admitted, one waiting for quota; a pod of a
	// tenant's own ReplicaSet copies its labels and is not a replica.
	web := f.deployment("web", "1", 2, true)
	rs := f.replicaSet(web, "web-1", "1")
	f.workload(f.pod(rs, "web", "web-1-a", true, false, ""), "deployment", "web-1-a", true)
	f.workload(f.pod(rs, "web", "web-1-b", true, true, ""), "deployment", "web-1-b", false)
	copyRS := &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: f.meta("copy", "rs-copy", map[string]string{"app": "web"}, nil)}
	f.objs = append(f.objs, copyRS)
	f.workload(f.pod(copyRS, "web", "copy-x", true, true, ""), "deployment", "copy-x", false)
	// api: a rolling update at full quota, a swap under way.
	api := f.deployment("api", "2", 2, true)
	old, cur := f.replicaSet(api, "api-1", "1"), f.replicaSet(api, "api-2", "2")
	f.workload(f.pod(old, "api", "api-1-a", true, false, ""), "deployment", "api-1-a", true)
	f.workload(f.pod(cur, "api", "api-2-b", true, true, "api-1-x"), "deployment", "api-2-b", false)
	// kv-cache: a Workload per ordinal, one pod not queued yet, one from
	// before the StatefulSet was labelled.
	kv := f.statefulSet("kv-cache", 4, false)
	f.workload(f.pod(kv, "kv-cache", "kv-cache-0", true, false, ""), "statefulset", "kv-cache-0", true)
	f.workload(f.pod(kv, "kv-cache", "kv-cache-1", true, true, ""), "statefulset", "kv-cache-1", false)
	f.pod(kv, "kv-cache", "kv-cache-2", true, true, "")
	f.pod(kv, "kv-cache", "kv-cache-3", false, false, "")
	// sharded: one gang of the whole set.
	sharded := f.statefulSet("sharded", 2, true)
	f.pod(sharded, "sharded", "sharded-0", true, false, "")
	f.pod(sharded, "sharded", "sharded-1", true, false, "")
	f.workload(sharded, "statefulset", "sharded-set", true)
	// chat: one replica on a Workload, two on records on their pods (one
	// forged: labelled with a UID not its own, so not counted).
	chat := f.deployment("chat", "1", 3, true)
	chatRS := f.replicaSet(chat, "chat-1", "1")
	f.workload(f.pod(chatRS, "chat", "chat-1-a", true, false, ""), "deployment", "chat-1-a", true)
	for _, name := range []string{"chat-1-b", "chat-1-c"} {
		p := f.pod(chatRS, "chat", name, true, false, "")
		p.Labels[berthv1.WorkloadLabel] = string(p.UID)
		if name == "chat-1-c" {
			p.Labels[berthv1.WorkloadLabel] = "w-chat-1-a"
		}
		p.Annotations = map[string]string{berthv1.AdmissionRecordAnnotation: `{"workload":"deployment-` + name + `-1a2b3",` +
			`"spec":{"queueName":"serving","podSets":[{"name":"main","count":1}]},"admission":{"clusterQueue":"gpus","podSetAssignments":[{"name":"main","count":1}]}}`}
	}
	// plain: not queued; tmpl: labelled only in its pod template.
	f.deployment("plain", "1", 1, false)
	tmpl := f.statefulSet("tmpl", 1, false)
	tmpl.Labels = nil
	tmpl.Spec.Template.Labels = map[string]string{berthv1.QueueNameLabel: "serving"}
	return f
}

// TestExplainServing finds the Workloads of Deployments and StatefulSets
// through their pods and sums the replicas up.
func TestExplainServing(t *testing.T) {
	s, err := scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(newServingFixture().objs...).Build()
	cases := []struct {
		name, target string
		workloads    []string
		want         []string
		wantErr      string
	}{
		{name: "a Deployment with admitted and pending replicas", target: "deployment/web",
			workloads: []string{"deployment-web-1-a-1a2b3", "deployment-web-1-b-1a2b3"},
			want: []string{"Deployment:", "serving/web, queued in LocalQueue serving; each replica's pod is a gang of one",
				"Replicas:", "2 wanted, 2 live pods; Workloads: 1 admitted, 1 pending (InsufficientQuota)",
				"serving/deployment-web-1-a-1a2b3, of deployment/web (replica pod web-1-a)", "Admitted: it holds quota of ClusterQueue gpus",
				"serving/deployment-web-1-b-1a2b3, of deployment/web (replica pod web-1-b)", "Why it waits:", "InsufficientQuota: insufficient quota"}},
		{name: "a Deployment whose replicas run on records on their pods", target: "deployment/chat",
			workloads: []string{"deployment-chat-1-a-1a2b3", "deployment-chat-1-b-1a2b3"},
			want: []string{"3 wanted, 3 live pods; Workloads: 2 admitted, 0 pending",
				"1 replica runs without a Workload: admitted at once, each admission recorded on the replica's pod (berth.dev/admission-record)",
				"1 pod is released but on neither a Workload nor a record berth counts",
				"serving/deployment-chat-1-b-1a2b3, of deployment/chat (replica pod chat-1-b)", "Admitted: it holds quota of ClusterQueue gpus"}},
		{name: "a Deployment's rollout swap", target: "deploy/api",
			workloads: []string{"deployment-api-1-a-1a2b3", "deployment-api-2-b-1a2b3"},
			want: []string{"Rollout:", "under way to revision 2 (ReplicaSet api-2): 1 of 2 live pods are new",
				"swap under way (berth.dev/swap-for): new replica api-2-b, gated, is next in line for the quota of old replica api-1-x, which berth deleted"}},
		{name: "a StatefulSet, an ordinal admitted, one waiting with a Workload, one in the queue without", target: "sts/kv-cache",
			workloads: []string{"statefulset-kv-cache-0-1a2b3", "statefulset-kv-cache-1-1a2b3", lifecycle.KeyWorkloadName("StatefulSet", servingNS, "kv-cache-2")},
			want: []string{"StatefulSet:", "each ordinal's pod is a gang of one", "4 wanted, 4 live pods; Workloads: 1 admitted, 2 pending",
				"1 replica waits in the queue without a Workload: berth writes nothing for a replica until it is admitted",
				"1 pod created before the StatefulSet was labelled berth.dev/queue-name: not queued",
				"of statefulset/kv-cache (replica pod kv-cache-1)", "of statefulset/kv-cache (replica pod kv-cache-2)"}},
		{name: "a whole-set StatefulSet", target: "statefulset.apps/sharded",
			workloads: []string{"statefulset-sharded-set-1a2b3"},
			want: []string{"the whole set is one gang (berth.dev/gang: set) with one Workload", "2 wanted, 2 live pods; Workloads: 1 admitted, 0 pending",
				"serving/statefulset-sharded-set-1a2b3, of statefulset/sharded (the whole set)"}},
		{name: "an unlabelled Deployment", target: "deployments/plain",
			wantErr: "deployment/plain in namespace serving is not queued by berth: it is not labelled berth.dev/queue-name, so its pods run without Workloads, " +
				"outside any queue's quota. To queue its replicas, label the Deployment itself: kubectl label deployment plain -n serving berth.dev/queue-name=LOCALQUEUE"},
		{name: "a StatefulSet labelled only in its template", target: "sts/tmpl",
			wantErr: "not labelled berth.dev/queue-name (its pod template has the label, but berth reads it on the StatefulSet)"},
		{name: "a name that is not there", target: "deployment/missing",
			wantErr: "no Deployment missing in namespace serving: kubectl get deployments -n serving lists them"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, name, err := parseExplainTarget([]string{tc.target})
			if err != nil {
				t.Fatal(err)
			}
			set, err := findServing(context.Background(), c, k, servingNS, name)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			all := make([]explained, 0, len(set.workloads))
			for _, wl := range set.workloads {
				got = append(got, wl.Name)
				ex := explained{wl: wl, item: newWorkloadItem(wl, "gpus", nil)}
				set.describe(&ex)
				all = append(all, ex)
			}
			if strings.Join(got, ",") != strings.Join(tc.workloads, ",") {
				t.Errorf("Workloads %v, want %v", got, tc.workloads)
			}
			var out bytes.Buffer
			if err := writeExplanations(&out, set, all, time.Now()); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("explanation lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestWorkloadCounts(t *testing.T) {
	item := func(status, reason string) explained {
		return explained{item: workloadItem{Status: status, Reason: reason}}
	}
	cases := []struct {
		name string
		all  []explained
		want string
	}{
		{"none", nil, "none"},
		{"one pending", []explained{item(statusPending, "InsufficientQuota")}, "0 admitted, 1 pending (InsufficientQuota)"},
		{"all for one reason", []explained{item(statusPending, "BlockedByHead"), item(statusPending, "BlockedByHead"), item(statusAdmitted, "Admitted")},
			"1 admitted, 2 pending (all BlockedByHead)"},
		{"the most common reason", []explained{item(statusPending, "InsufficientQuota"), item(statusPending, "InsufficientQuota"),
			item(statusPending, "")}, "0 admitted, 3 pending (most InsufficientQuota: 2)"},
		{"a reason not known yet", []explained{item(statusPending, "")}, "0 admitted, 1 pending (reason not known yet)"},
		{"other statuses", []explained{item(statusAdmitted, ""), item(statusEvicting, "Preempted"), item(statusBooking, "")},
			"1 admitted, 0 pending, 1 booking capacity, 1 evicting"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := workloadCounts(tc.all); got != tc.want {
				t.Errorf("= %q, want %q", got, tc.want)
			}
		})
	}
}
