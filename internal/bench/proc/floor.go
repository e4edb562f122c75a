package proc

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// floor writes the same objects with no reads and no cache: one Create each and one label patch.
// It has a first pass only: it cannot tell a second pass from the first.
type floor struct{ b *baseline }

func startFloor(cfg *rest.Config) (*floor, error) {
	s := newScheme()
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	return &floor{b: &baseline{client: c, scheme: s, track: newTracker(s), plugins: map[*config.Config][]plugin.Plugin{}}}, nil
}

func (f *floor) settle(context.Context) error { return nil }

func (f *floor) reconcile(ctx context.Context, cfg *config.Config, ns string) error {
	objs, labels, err := f.b.desired(cfg, ns)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := f.b.client.Create(ctx, o); err != nil {
			return err
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	return f.b.client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch))
}
