package kubeflow_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// What a reconciler returns: a requeue without an error while the new namespace's waypoint is not
// yet Programmed, and a terminal error for a namespace that is not the Profile's, which only a
// change of input mends.
func ExampleIntegration_Apply() {
	scheme := runner.NewScheme()
	if err := profilev1.AddToScheme(scheme); err != nil { // the controller's own Profile type
		panic(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithReturnManagedFields().WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice", Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bob", Annotations: map[string]string{ownership.OwnerAnnotation: "someone-else@example.com"}}},
	).Build()
	r, err := profileplugins.NewRunner(c, profileplugins.DefaultConfig())
	if err != nil {
		panic(err)
	}
	mesh := &kubeflow.Integration{Runner: r}
	profile := func(name string) *profilev1.Profile {
		return &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
			Spec: profilev1.ProfileSpec{Owner: rbacv1.Subject{Kind: rbacv1.UserKind, Name: name + "@example.com"}}}
	}

	res, err := mesh.Apply(context.Background(), profile("alice"))
	fmt.Printf("alice: requeue after %s, error %v\n", res.RequeueAfter, err)
	_, err = mesh.Apply(context.Background(), profile("bob"))
	fmt.Printf("bob: terminal %t: %v\n", errors.Is(err, reconcile.TerminalError(nil)), err)
	// Output:
	// alice: requeue after 15s, error <nil>
	// bob: terminal true: terminal error: namespace "bob" is not written for profile "bob": its "owner" annotation is "someone-else@example.com", not the Profile's spec.owner.name "bob@example.com"
}

// The profiles controller's flags keep their meaning: its user-id header and prefix, and its mesh
// mode, become the configuration's.
func ExampleConfigFromController() {
	cfg, err := kubeflow.ConfigFromController(kubeflow.ControllerSettings{
		UserIDHeader: "kubeflow-userid", UserIDPrefix: "", ServiceMeshMode: kubeflow.ServiceMeshAmbient,
	})
	fmt.Println(cfg.Authorization.UserIDHeader, cfg.Mesh.Mode, err)

	_, err = kubeflow.ConfigFromController(kubeflow.ControllerSettings{ServiceMeshMode: "linkerd"})
	fmt.Println(err)
	// Output:
	// kubeflow-userid ambient <nil>
	// -service-mesh-mode "linkerd": must be "istio-sidecar" or "istio-ambient"
}
