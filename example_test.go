package profileplugins_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

func ExampleNew() {
	plugins, err := profileplugins.New(profileplugins.DefaultConfig())
	if err != nil {
		panic(err)
	}
	for _, p := range plugins {
		fmt.Println(p.Name())
	}
	// Output:
	// authz
	// waypoint
	// pss
}

// The first Apply in a new namespace writes the two access policies, the waypoint and the Pod
// Security labels, and enrols the namespace in ambient, closed by the ztunnel policy. It sets no
// istio.io/use-waypoint yet: that waits until istiod has programmed the waypoint, and the Result
// asks to be called again.
func ExampleNewRunner() {
	cfg, err := profileplugins.LoadConfig("") // the documented defaults
	if err != nil {
		panic(err)
	}
	c := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().
		// The namespace as the profiles controller makes it for alice's Profile.
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice",
			Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}).Build()
	r, err := profileplugins.NewRunner(c, cfg)
	if err != nil {
		panic(err)
	}
	profile := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "5e0b1c1e"},
		Spec: profilev1.ProfileSpec{Owner: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice@example.com"}}}

	ctx := context.Background()
	res := r.Apply(ctx, profile)
	fmt.Println(strings.ReplaceAll(res.String(), "; ", "\n"))
	fmt.Println("error:", res.Err(), "requeue after:", res.RequeueAfter())
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "alice"}, ns); err != nil {
		panic(err)
	}
	for _, k := range slices.Sorted(maps.Keys(ns.Labels)) {
		fmt.Printf("%s=%s\n", k, ns.Labels[k])
	}
	// Output:
	// authz: created=2 updated=0 unchanged=0 deleted=0 labels+0-0 waiting=0 errors=0
	// pss: created=0 updated=0 unchanged=0 deleted=0 labels+6-0 waiting=0 errors=0
	// waypoint: created=1 updated=0 unchanged=0 deleted=0 labels+2-0 waiting=1 errors=0
	// error: <nil> requeue after: 15s
	// istio-injection=disabled
	// istio.io/dataplane-mode=ambient
	// pod-security.kubernetes.io/audit=restricted
	// pod-security.kubernetes.io/audit-version=latest
	// pod-security.kubernetes.io/enforce=baseline
	// pod-security.kubernetes.io/enforce-version=latest
	// pod-security.kubernetes.io/warn=restricted
	// pod-security.kubernetes.io/warn-version=latest
}
