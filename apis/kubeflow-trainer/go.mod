module github.com/kubeflow/trainer/v2

go 1.26.0

require (
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	sigs.k8s.io/jobset v0.12.0
	volcano.sh/apis v1.14.0
)
