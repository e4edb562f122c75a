package bench

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
)

// BenchmarkWaiting counts the reconciles of one namespace whose waypoint never becomes Programmed
// (istiod down) in the first hour of its requeues, when no event arrives: "fixed" requeues every
// wait after the Runner's WaitRequeue (15 s), as the reference controller did; "backoff" is
// kubeflow.Integration with the MaxWaitRequeue cmd/profile-plugins-controller sets. Each
// reconcile runs the real plugins on a fake client; the metric is what the hour holds.
func BenchmarkWaiting(b *testing.B) {
	for _, tc := range []struct {
		name string
		max  time.Duration
	}{{"fixed", 0}, {"backoff", kubeflow.DefaultMaxWaitRequeue}} {
		b.Run(tc.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				n = reconcilesInAnHour(b, tc.max)
			}
			b.ReportMetric(float64(n), "reconciles/h")
		})
	}
}

// reconcilesInAnHour applies a waiting Profile at each requeue its Integration asks for, from
// time 0, and counts the applies that start within the hour.
func reconcilesInAnHour(b *testing.B, maxWait time.Duration) int {
	const name = "kubeflow-user-example-com"
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "u-1"},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("user@example.com")}}
	c := fake.NewClientBuilder().WithScheme(envtest.NewScheme()).WithReturnManagedFields().WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Annotations: map[string]string{ownership.OwnerAnnotation: "user@example.com"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: name, UID: "u-1", Controller: ptr.To(true)}},
	}}).Build()
	r, err := plugins.NewRunner(c, plugins.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	in := &kubeflow.Integration{Runner: r, MaxWaitRequeue: maxWait}
	n := 0
	for at := time.Duration(0); at < time.Hour; n++ {
		res, err := in.Apply(context.Background(), profile)
		if err != nil || res.RequeueAfter == 0 {
			b.Fatalf("the namespace must wait for its waypoint: %v %v", res, err)
		}
		at += res.RequeueAfter
	}
	return n
}
