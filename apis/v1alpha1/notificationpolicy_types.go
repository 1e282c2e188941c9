package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FailureKind is a kind of failure of a gang that a notification policy
// reports.
// +kubebuilder:validation:Enum=Restarted;OOMKilled;CrashLoopBackOff;ImagePullBackOff;Unschedulable;NodeLost;Evicted;Requeued;RetriesExhausted;BookingFailed
type FailureKind string

// NotificationSinkType is where reports go.
// +kubebuilder:validation:Enum=Slack;Webhook;Event
type NotificationSinkType string

// The sink types.
const (
	// SinkSlack posts Block Kit messages to a Slack incoming webhook.
	SinkSlack NotificationSinkType = "Slack"
	// SinkWebhook posts a JSON document (notify.berth.dev/v1alpha1) to a URL.
	SinkWebhook NotificationSinkType = "Webhook"
	// SinkEvent records a Warning event on the job.
	SinkEvent NotificationSinkType = "Event"
)

// SecretKeyRef names one key of a Secret.
type SecretKeyRef struct {
	// name of the Secret. A NotificationPolicy's Secret is in the policy's
	// namespace; a ClusterNotificationPolicy's is in berth's own namespace.
	// berth reads it with a plain get: grant berth's service account get
	// on this one Secret (docs/notifications.md).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret's data holding the URL.
	// +optional
	// +kubebuilder:default=url
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// NotificationSink is where a policy's reports go.
// +kubebuilder:validation:XValidation:rule="self.type == 'Event' || has(self.urlSecretRef)",message="a Slack or Webhook sink needs urlSecretRef: the Secret key holding its URL"
type NotificationSink struct {
	// type of the sink: Slack (an incoming webhook), Webhook (JSON to any
	// URL) or Event (a Warning event on the job).
	// +required
	Type NotificationSinkType `json:"type"`
	// urlSecretRef is the Secret key that holds the webhook URL (a
	// credential: it is never logged or copied into events or status).
	// +optional
	URLSecretRef *SecretKeyRef `json:"urlSecretRef,omitempty"`
}

// NotificationSettings are what every notification policy has.
type NotificationSettings struct {
	// kinds of failure to report; empty means all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10
	Kinds []FailureKind `json:"kinds,omitempty"`

	// sink is where the reports go.
	// +required
	Sink NotificationSink `json:"sink"`

	// dedupWindowSeconds: at most one report per gang and kind of failure
	// per window; the failures inside it are folded into one ("3 of 8 pods
	// restarted").
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=86400
	DedupWindowSeconds int32 `json:"dedupWindowSeconds,omitempty"`

	// maxReportsPerHour bounds the reports this policy sends in any hour,
	// over all gangs (bursts of up to 10). The namespaces a cluster policy
	// selects take turns at it, the one that sent least recently first; a
	// report the rate does not let out at once waits in a queue of its
	// namespace of at most 10, and what overflows it is dropped and counted
	// in berth_notifications_total{result="dropped"}.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	MaxReportsPerHour int32 `json:"maxReportsPerHour,omitempty"`

	// logLines is how many lines of the previous container's log a report
	// carries (0: none); logBytes bounds them. Unset means 20 in a
	// NotificationPolicy, whose reports go to the namespace's own team,
	// and 0 in a ClusterNotificationPolicy, whose reports leave every
	// selected tenant's namespace: a platform team that wants tenants' logs
	// sets it. Lines that look like secrets (bearer tokens, password= and
	// token= pairs, cloud keys, private keys) are redacted either way.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=200
	LogLines *int32 `json:"logLines,omitempty"`
	// +optional
	// +kubebuilder:default=2048
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=2800
	LogBytes int32 `json:"logBytes,omitempty"`

	// unschedulableAfterSeconds: a pod of an admitted gang still not bound
	// after this long is reported, with the scheduler's message.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=30
	UnschedulableAfterSeconds int32 `json:"unschedulableAfterSeconds,omitempty"`
}

// NotificationPolicySpec selects a namespace's gangs to report on.
type NotificationPolicySpec struct {
	NotificationSettings `json:",inline"`

	// localQueues of this namespace whose gangs are reported; empty means
	// all of the namespace's gangs.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	LocalQueues []string `json:"localQueues,omitempty"`
}

// ClusterNotificationPolicySpec selects gangs across namespaces.
type ClusterNotificationPolicySpec struct {
	NotificationSettings `json:",inline"`

	// namespaceSelector selects the namespaces whose gangs are reported;
	// empty selects all.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// clusterQueues whose gangs are reported; empty means all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	ClusterQueues []string `json:"clusterQueues,omitempty"`
}

// NotificationPolicyStatus is what berth observed of a policy.
type NotificationPolicyStatus struct {
	// conditions: Ready says whether berth uses the policy: it can read
	// the sink's Secret, the URL in it is valid for the sink's type and
	// the policy is within its namespace's cap; if not, what to do.
	// Delivered says how the last report that went out ended (absent until
	// one did).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=4
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Conditions of a notification policy.
const (
	// ConditionReady says whether berth uses the policy's sink.
	ConditionReady = "Ready"
	// ConditionDelivered says how the last report that went out to the
	// sink ended.
	ConditionDelivered = "Delivered"
)

// Reasons of a notification policy's Ready condition.
const (
	// ReasonSinkReady (Ready=True): the sink's URL was read and is valid.
	ReasonSinkReady = "SinkReady"
	// ReasonSecretNotReadable (Ready=False): the Secret is missing, berth
	// may not read it, or it has no such key.
	ReasonSecretNotReadable = "SecretNotReadable"
	// ReasonInvalidURL (Ready=False): the Secret's value is not an https
	// URL, or a Slack sink's URL is not on a host berth allows for Slack.
	ReasonInvalidURL = "InvalidURL"
	// ReasonEgressRefused (Ready=False): the URL names an IP address berth
	// does not connect to (loopback, link-local, private, the cluster's
	// ranges) and no admin allowed it. Also a reason of Delivered=False,
	// when the sink's name resolved to such an address.
	ReasonEgressRefused = "EgressRefused"
	// ReasonTooManyPolicies (Ready=False): the namespace has more
	// NotificationPolicies than berth uses per namespace; this one is
	// among the newest, beyond the cap, and is not used.
	ReasonTooManyPolicies = "TooManyPolicies"
)

// Reasons of a notification policy's Delivered condition.
const (
	// ReasonDelivered (Delivered=True): the sink accepted the last report.
	ReasonDelivered = "Delivered"
	// ReasonSinkRedirected (Delivered=False): the sink answered with a
	// redirect, which berth does not follow.
	ReasonSinkRedirected = "SinkRedirected"
	// ReasonDeliveryFailed (Delivered=False): the sink refused the report
	// or could not be reached, and retries, if any, ran out.
	ReasonDeliveryFailed = "DeliveryFailed"
)

// NotificationPolicy sends failure reports of its namespace's gangs
// (restarts, OOM kills, crash loops, stuck or lost pods, evictions) to
// Slack, a webhook or events. Tenants create it; it sees only its own
// namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Sink",type=string,JSONPath=`.spec.sink.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NotificationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the policy.
	// +required
	Spec NotificationPolicySpec `json:"spec"`
	// status is what berth observed of the policy.
	// +optional
	Status NotificationPolicyStatus `json:"status,omitempty"`
}

// NotificationPolicyList is a list of NotificationPolicies.
//
// +kubebuilder:object:root=true
type NotificationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NotificationPolicy `json:"items"`
}

// ClusterNotificationPolicy sends failure reports of the gangs of the
// namespaces and ClusterQueues it selects. Platform teams create it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=berth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Sink",type=string,JSONPath=`.spec.sink.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterNotificationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the policy.
	// +required
	Spec ClusterNotificationPolicySpec `json:"spec"`
	// status is what berth observed of the policy.
	// +optional
	Status NotificationPolicyStatus `json:"status,omitempty"`
}

// ClusterNotificationPolicyList is a list of ClusterNotificationPolicies.
//
// +kubebuilder:object:root=true
type ClusterNotificationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterNotificationPolicy `json:"items"`
}
