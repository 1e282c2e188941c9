package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAmbiguous(t *testing.T) {
	gr := schema.GroupResource{Group: "berth.dev", Resource: "workloads"}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"conflict: rejected before writing", apierrors.NewConflict(gr, "w", errors.New("changed")), false},
		{"not found", apierrors.NewNotFound(gr, "w"), false},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "berth.dev", Kind: "Workload"}, "w", nil), false},
		{"forbidden", apierrors.NewForbidden(gr, "w", errors.New("rbac")), false},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), false},
		{"timeout: may have been committed", apierrors.NewTimeoutError("lost", 1), true},
		{"server error", apierrors.NewInternalError(errors.New("etcd")), true},
		{"deadline", fmt.Errorf("patching: %w", context.DeadlineExceeded), true},
		{"connection reset", errors.New("read: connection reset by peer"), true},
	}
	for _, tc := range cases {
		if got := ambiguous(tc.err); got != tc.want {
			t.Errorf("%s: ambiguous = %v, want %v", tc.name, got, tc.want)
		}
	}
}
