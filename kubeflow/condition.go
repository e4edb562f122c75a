package kubeflow

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// ConditionType is the type of the Profile status condition [Condition] returns.
const ConditionType = "ProfilePluginsReady"

// Condition summarises res as a Profile status condition: True when every plugin reached its
// desired state, False with the errors and waiting reasons otherwise (runner.Result.Summary). A
// reconciler writes it to the Profile's status from Integration.AfterApply.
func Condition(res *runner.Result) profilev1.ProfileCondition {
	ready, msg := res.Summary()
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	return profilev1.ProfileCondition{Type: ConditionType, Status: string(status), Message: msg}
}
