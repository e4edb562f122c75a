package authz_test

import (
	"fmt"

	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func ExampleContributorPolicy() {
	pol, err := authz.ContributorPolicy(config.Default(), "alice", "bob@example.com", "edit")
	if err != nil {
		panic(err)
	}
	fmt.Println(pol.Name)
	fmt.Println(pol.Spec.TargetRefs[0].Kind, pol.Spec.TargetRefs[0].Name)
	fmt.Println(pol.Spec.Rules[0].When[0].Key, pol.Spec.Rules[0].When[0].Values)
	// Output:
	// user-bob-example-com-clusterrole-edit
	// Gateway waypoint
	// request.headers[kubeflow-userid] [bob@example.com]
}

func ExampleL7Attributes() {
	spec := &securityv1beta1.AuthorizationPolicy{Rules: []*securityv1beta1.Rule{
		{From: []*securityv1beta1.Rule_From{{Source: &securityv1beta1.Source{Namespaces: []string{"kubeflow"}}}}},
		{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Paths: []string{"/api"}}}}},
	}}
	fmt.Println(authz.L7Attributes(spec))
	// Output: [rules[1].to[0].operation.paths]
}

func ExampleToAmbient() {
	in := &istiosecurityv1.AuthorizationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "ml-pipeline-ui", Namespace: "kubeflow"},
		Spec: securityv1beta1.AuthorizationPolicy{
			Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "ml-pipeline-ui"}},
			Rules:    []*securityv1beta1.Rule{{To: []*securityv1beta1.Rule_To{{Operation: &securityv1beta1.Operation{Methods: []string{"GET"}}}}}},
		},
	}
	out, report, err := authz.ToAmbient(in, authz.ServiceTarget("ml-pipeline-ui"))
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Spec.Selector == nil, out.Spec.TargetRefs[0].Kind, out.Spec.TargetRefs[0].Name)
	fmt.Println(report.L7)
	// Output:
	// true Service ml-pipeline-ui
	// [rules[0].to[0].operation.methods]
}
