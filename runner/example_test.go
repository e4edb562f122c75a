package runner_test

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// greeter is a complete plugin: one ConfigMap and one namespace label.
type greeter struct{}

func (greeter) Name() string { return "greeter" }

func (greeter) Kinds() []client.ObjectList { return []client.ObjectList{&corev1.ConfigMapList{}} }

func (greeter) Generate(t plugin.Target) (plugin.Desired, error) {
	return plugin.Desired{
		Objects: []client.Object{&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "welcome"},
			Data:       map[string]string{"owner": t.Owner},
		}},
		Labels: map[string]string{"example.com/greeted": "true"},
	}, nil
}

var _ plugin.Plugin = greeter{}

func ExampleRunner_Apply() {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(runner.NewScheme()).WithReturnManagedFields().
		// The namespace as the profiles controller creates it: the runner writes only into a
		// namespace that is the Profile's.
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "alice",
			Annotations: map[string]string{ownership.OwnerAnnotation: "alice@example.com"}}}).Build()
	profile := &profilev1.Profile{
		ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "5e0b1c1e"},
		Spec:       profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")},
	}
	runner, err := runner.NewRunner(c, greeter{})
	if err != nil {
		panic(err)
	}

	first := runner.Apply(ctx, profile)
	fmt.Println("first: ", first)
	second := runner.Apply(ctx, profile)
	fmt.Println("second:", second, "changed:", second.Changed())
	fmt.Println(second.Summary())
	// Output:
	// first:  greeter: created=1 updated=0 unchanged=0 deleted=0 labels+1-0 waiting=0 errors=0
	// second: greeter: created=0 updated=0 unchanged=1 deleted=0 labels+0-0 waiting=0 errors=0 changed: false
	// true all plugins applied
}

func ExampleRender() {
	target := plugin.Target{Namespace: "alice", Owner: "alice@example.com"}
	r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{greeter{}}, target)
	if err != nil {
		panic(err)
	}
	out, _ := r.YAML()
	os.Stdout.Write(out)
	// Output:
	// apiVersion: v1
	// kind: Namespace
	// metadata:
	//   labels:
	//     example.com/greeted: "true"
	//   name: alice
	// ---
	// apiVersion: v1
	// data:
	//   owner: alice@example.com
	// kind: ConfigMap
	// metadata:
	//   labels:
	//     app.kubernetes.io/managed-by: profile-plugins
	//     profile-plugins.kubeflow-ambient.io/plugin: greeter
	//   name: welcome
	//   namespace: alice
}

func ExampleLookup() {
	obs := plugin.Observed{Objects: []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "welcome"}, Data: map[string]string{"a": "b"}},
	}}
	cm, ok := plugin.Lookup[*corev1.ConfigMap](obs, "welcome")
	fmt.Println(ok, cm.Data["a"])
	_, ok = plugin.Lookup[*corev1.Secret](obs, "welcome")
	fmt.Println(ok)
	// Output:
	// true b
	// false
}
