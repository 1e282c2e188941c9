package v1alpha1

// Labels and annotations through which users and berth talk about jobs.
const (
	// QueueNameLabel names the LocalQueue, in the job's namespace, that a job
	// is submitted to. Only jobs carrying it are managed by berth.
	QueueNameLabel = "berth.dev/queue-name"

	// WorkloadAnnotation is set on a job once berth has created its Workload,
	// and names it.
	WorkloadAnnotation = "berth.dev/workload"

	// OriginalSchedulingAnnotation records, as JSON, the node selector and
	// tolerations a job's pod template had before berth added those of the
	// admitted flavor, so that an evicted job can be restored exactly.
	OriginalSchedulingAnnotation = "berth.dev/original-scheduling"
)
