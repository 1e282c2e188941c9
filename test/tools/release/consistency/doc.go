// Package consistency holds the tests that keep berth's two installs
// together: the kustomize bundle (config/default, install.yaml) and the
// Helm chart (config/chart/berth) must render the same objects, the chart
// must pass every berth-controller flag it offers and offer every flag
// berth-controller has, its schema must reject bad values, and what either
// installs must pass Pod Security "restricted".
//
// The comparisons parse both sides into generic objects and compare them
// field by field, as an apply would send them. Nothing is normalised away
// except what a test names: the Namespace, which the chart renders only
// with namespace.create (Helm cannot install into a namespace it creates
// from its own templates).
package consistency
