package platform_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// The kubeflow namespace still runs sidecars, as in most installs, while the default
// configuration says its callers are ambient. In a real cluster, pass a manager's APIReader.
func ExampleCheck() {
	pod := func(namespace, name, serviceAccount string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
			Spec:       corev1.PodSpec{ServiceAccountName: serviceAccount},
		}
	}
	sidecar := map[string]string{"sidecar.istio.io/status": "{}"}
	cfg := plugins.DefaultConfig()
	// The waypoint class defaults an admin applied once (`render -cluster`); without them the
	// check would also say that Profiles choosing enforce restricted would wait forever.
	classDefaults, err := waypoint.ClassDefaults(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The waypoints' default deny and the admission guard, applied with them: without them the
	// check reports each missing.
	defaultDeny, err := waypoint.ClusterDefaultDeny(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	guarded, err := guard.Objects(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	reader := fake.NewClientBuilder().
		WithScheme(runner.NewScheme()).
		// The API server selects pods by spec.serviceAccountName; the fake client needs an index.
		WithIndex(&corev1.Pod{}, "spec.serviceAccountName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.ServiceAccountName}
		}).
		WithObjects(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow", Labels: map[string]string{"istio-injection": "enabled"}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}},
			pod("istio-system", "istio-ingressgateway-1", "istio-ingressgateway-service-account", nil),
			// istiod, as guard.meshServiceAccounts names it: else the guard would refuse its writes.
			pod("istio-system", "istiod-1", "istiod", nil),
			pod("kubeflow", "ml-pipeline-ui-1", "ml-pipeline-ui", sidecar),
			classDefaults, defaultDeny,
		).
		WithObjects(guarded...).
		Build()

	report, err := platform.Check(context.Background(), reader, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range report.Findings {
		fmt.Printf("%s %s: %s\n", f.Kind, f.What, f.Problem)
	}
	// Output:
	// DataPlaneMismatch pipelines-ui: configured dataPlane ambient, but runs with a sidecar (1 of 1 pod(s), e.g. ml-pipeline-ui-1): its calls skip the waypoint, and the ztunnel policy denies them
	// DataPlaneMismatch notebook-controller: configured dataPlane ambient, but runs with a sidecar (no pod runs as ServiceAccount notebook-controller-service-account, so this is read from the labels of namespace kubeflow): its calls skip the waypoint, and the ztunnel policy denies them
	// DataPlaneMismatch katib-controller: configured dataPlane ambient, but runs with a sidecar (no pod runs as ServiceAccount katib-controller, so this is read from the labels of namespace kubeflow): its calls skip the waypoint, and the ztunnel policy denies them
}
