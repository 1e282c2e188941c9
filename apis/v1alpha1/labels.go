package v1alpha1

// Labels and annotations through which users and berth talk about jobs.
const (
	// QueueNameLabel names the LocalQueue, in the job's namespace, that a job
	// is submitted to. Only jobs carrying it are managed by berth.
	QueueNameLabel = "berth.dev/queue-name"

	// WorkloadLabel is set on every pod berth starts and holds the UID of
	// the Workload whose quota the pod runs on (a UID, not the name, so it
	// is always a valid label value). berth finds a gang's pods by it when
	// the job is gone: a Workload keeps its quota, and its finalizer, while
	// any non-terminal pod carries its UID.
	WorkloadLabel = "berth.dev/workload"

	// PodSetLabel is set on every pod berth starts beside WorkloadLabel and
	// names the pod set of the Workload the pod belongs to, so the pod's
	// requests can be charged to the flavor its pod set was assigned.
	PodSetLabel = "berth.dev/pod-set"

	// OriginalSchedulingAnnotation records, as JSON, the node selector and
	// tolerations a job's pod template had before berth added those of the
	// admitted flavor, so that an evicted job can be restored exactly.
	OriginalSchedulingAnnotation = "berth.dev/original-scheduling"
)

// Labels and annotations of job kinds beyond batch/v1 Job.
const (
	// PriorityClassLabel names a PriorityClass whose value orders the job in
	// its queue, without giving its pods that priority (so kube-scheduler
	// never preempts other pods for them). It takes precedence over the pod
	// template's priorityClassName.
	PriorityClassLabel = "berth.dev/priority-class"

	// PodGroupLabel names the group a pod belongs to: the pods of a group,
	// in one namespace, are one gang. A labelled pod without it is a group
	// of one.
	PodGroupLabel = "berth.dev/pod-group"

	// PodGroupTotalCountAnnotation is the number of pods of the group; every
	// member must carry the same value.
	PodGroupTotalCountAnnotation = "berth.dev/pod-group-total-count"

	// JobKeyLabel is set on the Workload of a gang made of several objects
	// (a pod group) and holds the gang's key (the group name).
	JobKeyLabel = "berth.dev/job-key"

	// SchedulingGroupLabel on a pod names the scheduling.k8s.io PodGroup
	// it joins: berth's pod webhook copies it into the pod's
	// spec.schedulingGroup.podGroupName when the pod is created. berth sets
	// it on the pod templates of an admitted gang when it hands gangs to
	// kube-scheduler's gang scheduling (berth-controller --pod-groups).
	SchedulingGroupLabel = "berth.dev/scheduling-group"

	// AdmissionGate is the scheduling gate berth puts on a labelled pod at
	// creation, and removes when the pod's group is admitted.
	AdmissionGate = "berth.dev/admission"

	// GangAnnotation on a StatefulSet chooses its gangs: GangSet makes the
	// whole StatefulSet one gang of spec.replicas pods that start together;
	// without it each ordinal is a gang of one. berth's webhook copies it
	// into the pod template as the label of the same key, which is what
	// berth reads on the pods.
	GangAnnotation = "berth.dev/gang"
	// GangSet is the value of GangAnnotation that makes a StatefulSet one
	// gang.
	GangSet = "set"

	// SwapAnnotation is set by berth on a gated surge pod of a Deployment's
	// rolling update at full quota and names the admitted replica of an
	// older ReplicaSet that berth deleted to make room for it. One swap per
	// Deployment is under way while a gated pod carries it.
	SwapAnnotation = "berth.dev/swap-for"

	// AdmissionRecordAnnotation is written by berth, with the release, on a
	// Deployment replica or StatefulSet ordinal admitted without a
	// Workload (--replica-records): the replica's admission and what it is
	// charged for, as JSON. The pod is then its own quota record: berth
	// counts the replica's quota while the pod lives and gives it back when
	// the pod ends or is gone. Only berth may set, change or remove it.
	AdmissionRecordAnnotation = "berth.dev/admission-record"
)

// Topology and capacity.
const (
	// TopologyRequiredAnnotation on a job names a topology level (one of its
	// flavor's topologyLevels keys): all the job's pods must run in one
	// domain of that level, or the job is not admitted.
	TopologyRequiredAnnotation = "berth.dev/topology-required"

	// TopologyPreferredAnnotation on a job names a topology level: the job's
	// pods should run in as few domains of that level as possible. One
	// domain is tried first, then one domain of each coarser level, then
	// anywhere.
	TopologyPreferredAnnotation = "berth.dev/topology-preferred"

	// CapacityPoolLabel on a Node names the CapacityPool it belongs to.
	CapacityPoolLabel = "berth.dev/capacity-pool"

	// PlacementLabel is set on the pods of a gang berth placed in a topology
	// domain, and holds its Workload's UID. berth reserves the domain's
	// capacity for the gang itself, so it does not count these pods again
	// when it reads the nodes' free capacity.
	PlacementLabel = "berth.dev/placement"
)
