package guard_test

import (
	"fmt"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// The guard for a controller that runs as the profiles controller's ServiceAccount (a fork).
func ExampleObjects() {
	cfg := config.Default()
	cfg.Guard.ControllerServiceAccount = "kubeflow/profiles-controller-service-account"
	objs, err := guard.Objects(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objs[:2] {
		fmt.Printf("%T %s\n", o, o.GetName())
	}
	fmt.Println(len(objs), "objects")
	// Output:
	// *v1.ValidatingAdmissionPolicy profile-plugins-guard-managed-objects
	// *v1.ValidatingAdmissionPolicyBinding profile-plugins-guard-managed-objects
	// 22 objects
}
