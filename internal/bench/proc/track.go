package proc

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// tracker remembers the resourceVersion each write returned, so that between passes the process
// waits until its own reads show its own writes, reading only what it reads anyway (its cache):
// listing everything from the API server instead would cost memory that is the benchmark's, not
// the implementation's.
type tracker struct {
	scheme *runtime.Scheme
	mu     sync.Mutex
	last   map[objectKey]string // "" after a delete: wait for NotFound
}

type objectKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

func newTracker(s *runtime.Scheme) *tracker {
	return &tracker{scheme: s, last: map[objectKey]string{}}
}

// wrap returns c with every successful write recorded.
func (t *tracker) wrap(c client.WithWatch) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return t.object(obj, c.Create(ctx, obj, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return t.object(obj, c.Update(ctx, obj, opts...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return t.object(obj, c.Patch(ctx, obj, patch, opts...))
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			err := c.Apply(ctx, obj, opts...)
			if err == nil {
				t.applied(obj)
			}
			return err
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			err := c.Delete(ctx, obj, opts...)
			if err == nil {
				obj.SetResourceVersion("")
			}
			return t.object(obj, err)
		},
	})
}

func (t *tracker) object(obj client.Object, err error) error {
	if err != nil {
		return err
	}
	gvk, gerr := apiutil.GVKForObject(obj, t.scheme)
	if gerr != nil {
		return gerr
	}
	t.record(objectKey{gvk, obj.GetNamespace(), obj.GetName()}, obj.GetResourceVersion())
	return nil
}

// applied records a server-side apply: the client decodes the answer into the apply
// configuration, typed or unstructured, so its JSON form carries the new resourceVersion.
func (t *tracker) applied(obj runtime.ApplyConfiguration) {
	data, err := json.Marshal(obj)
	if err != nil {
		return
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name, Namespace, ResourceVersion string
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &m) != nil {
		return
	}
	gv, err := schema.ParseGroupVersion(m.APIVersion)
	if err != nil {
		return
	}
	t.record(objectKey{gv.WithKind(m.Kind), m.Metadata.Namespace, m.Metadata.Name}, m.Metadata.ResourceVersion)
}

func (t *tracker) record(k objectKey, rv string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last[k] = rv
}

// settleTimeout bounds one wait; a cache that falls this far behind is a failure to report.
const settleTimeout = 10 * time.Minute

// wait polls reader until it shows every recorded write (the resourceVersion written or a later
// one; a deleted object gone), then forgets them.
func (t *tracker) wait(ctx context.Context, reader client.Reader) error {
	t.mu.Lock()
	pending := t.last
	t.last = map[objectKey]string{}
	t.mu.Unlock()
	deadline := time.Now().Add(settleTimeout)
	for len(pending) > 0 {
		for k, rv := range pending {
			obj, err := t.scheme.New(k.gvk)
			if err != nil {
				return err
			}
			cur := obj.(client.Object)
			err = reader.Get(ctx, client.ObjectKey{Namespace: k.namespace, Name: k.name}, cur)
			switch {
			case rv == "" && apierrors.IsNotFound(err):
				delete(pending, k)
			case err == nil && rv != "" && atLeast(cur.GetResourceVersion(), rv):
				delete(pending, k)
			case err != nil && !apierrors.IsNotFound(err):
				return err
			}
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cache did not show %d writes within %s", len(pending), settleTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// atLeast compares resourceVersions as etcd's revisions; they are opaque to clients, but this
// process only ever talks to the benchmark's API server.
func atLeast(have, want string) bool {
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return have == want
	}
	return h >= w
}
