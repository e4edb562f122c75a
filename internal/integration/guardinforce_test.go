package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/guard"
)

// barriers numbers the barrier policies, which tests sharing an API server may create at once.
var barriers atomic.Int64

// guardInForce waits until every ValidatingAdmissionPolicy and binding created on c before the
// call is in force. Each policy takes effect some time after it is created, on its own: waiting
// for one of the guard's refusals says nothing about the others (a Service was once admitted
// after the pods policy had refused a probe). The API server compiles its policies from one
// snapshot of its policy and binding informers (k8s.io/apiserver
// pkg/admission/plugin/policy/generic/policy_source.go, calculatePolicyData), and an informer
// sees objects in the order they were written, so a barrier policy created after all the others
// that is seen refusing means every earlier one is in that snapshot too.
func guardInForce(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("zz-test-barrier-%d", barriers.Add(1))
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr.To(admissionv1.Fail),
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
		MatchConditions: []admissionv1.MatchCondition{{Name: "the-probe", Expression: "object.metadata.name == '" + name + "'"}},
		Validations:     []admissionv1.Validation{{Expression: "false", Message: "barrier " + name}},
	}}
	require.NoError(t, c.Create(ctx, policy))
	binding := guard.Binding(name)
	binding.Labels = nil
	require.NoError(t, c.Create(ctx, binding))
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	require.Eventually(t, func() bool {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "barrier "+name)
	}, 30*time.Second, 100*time.Millisecond, "the API server compiles the policies created before %s", name)
	require.NoError(t, c.Delete(ctx, binding))
	require.NoError(t, c.Delete(ctx, policy))
}
