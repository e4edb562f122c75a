package authz_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
)

// The report says what the conversion changes in enforcement, and only what applies: the
// namespace-wide note only for a policy without a selector, the L4 note only for one without L7
// attributes, the L7 note only for one with them.
func TestConversionReportNotes(t *testing.T) {
	selector := &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "x"}}
	l4 := []*securityv1beta1.Rule{{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Namespaces: []string{"kubeflow"}}}}}}
	l7 := []*securityv1beta1.Rule{{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Paths: []string{"/api"}}}}}}
	const (
		wholeNS = "applied to the whole namespace"
		onlyL4  = "uses only L4 attributes"
		withL7  = "its L7 rules now run only on traffic through the target"
	)
	cases := []struct {
		name     string
		selector *typev1beta1.WorkloadSelector
		rules    []*securityv1beta1.Rule
		want     []string
		not      []string
	}{
		{"selector, L4", selector, l4, []string{onlyL4}, []string{wholeNS, withL7}},
		{"selector, L7", selector, l7, []string{withL7}, []string{wholeNS, onlyL4}},
		{"namespace-wide, L4", nil, l4, []string{wholeNS, onlyL4}, []string{withL7}},
		{"namespace-wide, L7", nil, l7, []string{wholeNS, withL7}, []string{onlyL4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "kubeflow"},
				Spec: securityv1beta1.AuthorizationPolicy{Selector: tc.selector, Rules: tc.rules}}
			_, rep, err := authz.ToAmbient(in, authz.GatewayTarget("waypoint"))
			require.NoError(t, err)
			require.Len(t, rep.Notes, len(tc.want), "%v", rep.Notes)
			for _, w := range tc.want {
				assert.True(t, anyContains(rep.Notes, w), "missing %q in %v", w, rep.Notes)
			}
			for _, n := range tc.not {
				assert.False(t, anyContains(rep.Notes, n), "unexpected %q in %v", n, rep.Notes)
			}
		})
	}
}

func anyContains(list []string, part string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, part) })
}
