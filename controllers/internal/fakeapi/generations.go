package fakeapi

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Generations wraps c so that objects get what the API server gives them
// and the fake client does not: a UID and generation 1 on Create, and a
// new generation on an Update that changed the spec. Tests of code that
// keys on generations (what changed since it last looked) need them.
// Patches and status writes keep the generation, as the API server does
// for status; a Patch of the spec is not counted.
func Generations(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if obj.GetUID() == "" {
				obj.SetUID(types.UID(fmt.Sprintf("uid-%s-%s", obj.GetNamespace(), obj.GetName())))
			}
			obj.SetGeneration(1)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			stored, ok := obj.DeepCopyObject().(client.Object)
			if !ok {
				return c.Update(ctx, obj, opts...)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
				return c.Update(ctx, obj, opts...)
			}
			gen := stored.GetGeneration()
			changed, err := specChanged(stored, obj)
			if err != nil {
				return err
			}
			if changed {
				gen++
			}
			obj.SetGeneration(gen)
			return c.Update(ctx, obj, opts...)
		},
	})
}

// specChanged reports whether two versions of an object differ in spec.
func specChanged(old, now client.Object) (bool, error) {
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return false, fmt.Errorf("reading the spec of %s: %w", old.GetName(), err)
	}
	n, err := runtime.DefaultUnstructuredConverter.ToUnstructured(now)
	if err != nil {
		return false, fmt.Errorf("reading the spec of %s: %w", now.GetName(), err)
	}
	return !equality.Semantic.DeepEqual(o["spec"], n["spec"]), nil
}
