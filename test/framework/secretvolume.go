package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretVolume stands in for the kubelet's Secret volume for a berth that
// runs as a process rather than in a pod: it keeps dir a copy of the
// Secret, updated the way the kubelet's atomic writer does it — the files
// are symlinks into ..data, which is swapped in one rename — so that what
// reads the files (controller-runtime's certwatcher) sees what it sees in
// a pod. A Secret without data leaves dir empty, as a mounted empty Secret
// does. It returns when ctx ends.
func SecretVolume(ctx context.Context, c client.Reader, key types.NamespacedName, dir string, period time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	version := ""
	err := wait.PollUntilContextCancel(ctx, period, true, func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, key, s); err != nil {
			if apierrors.IsNotFound(err) || ctx.Err() != nil {
				return false, nil
			}
			return false, fmt.Errorf("reading Secret %s: %w", key, err)
		}
		if s.ResourceVersion == version {
			return false, nil
		}
		if err := writeAtomically(dir, s.Data); err != nil {
			return false, err
		}
		version = s.ResourceVersion
		return false, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// writeAtomically projects data into dir: a new timestamped directory,
// ..data pointed at it by rename, one symlink per key into ..data.
func writeAtomically(dir string, data map[string][]byte) error {
	stamp := filepath.Join(dir, "..data-"+strconv.FormatInt(time.Now().UnixNano(), 10))
	if err := os.Mkdir(stamp, 0o700); err != nil {
		return fmt.Errorf("projecting Secret: %w", err)
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := os.WriteFile(filepath.Join(stamp, k), data[k], 0o600); err != nil {
			return fmt.Errorf("projecting Secret key %s: %w", k, err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(stamp), tmp); err != nil {
		return fmt.Errorf("projecting Secret: %w", err)
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return fmt.Errorf("projecting Secret: %w", err)
	}
	for _, k := range keys {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
			return fmt.Errorf("projecting Secret key %s: %w", k, err)
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}
