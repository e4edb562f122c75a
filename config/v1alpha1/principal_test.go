package v1alpha1_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

func TestParsePrincipal(t *testing.T) {
	td, ns, sa, err := config.ParsePrincipal("cluster.local/ns/kubeflow/sa/ml-pipeline-ui")
	require.NoError(t, err)
	assert.Equal(t, []string{"cluster.local", "kubeflow", "ml-pipeline-ui"}, []string{td, ns, sa})
	assert.Equal(t, "cluster.local/ns/kubeflow/sa/ml-pipeline-ui", config.Principal(td, ns, sa), "Principal is its inverse")

	for _, p := range []string{
		"", "kubeflow/ml-pipeline-ui", "spiffe://cluster.local/ns/kubeflow/sa/ui",
		"cluster.local/namespace/kubeflow/sa/ui", "cluster.local/ns/kubeflow/serviceaccount/ui",
		"cluster.local/ns/kubeflow/sa/ui/x", "/ns/kubeflow/sa/ui", "cluster.local/ns//sa/ui", "cluster.local/ns/kubeflow/sa/",
	} {
		_, _, _, err := config.ParsePrincipal(p)
		assert.EqualError(t, err, fmt.Sprintf("%q: must look like <trust domain>/ns/<namespace>/sa/<service account>", p))
	}
}

// Validation refuses what ParsePrincipal refuses, with the same words and the field path.
func TestValidatePrincipalRefusesWhatDoesNotParse(t *testing.T) {
	path := field.NewPath("authorization", "principals", "ingressGateway")
	for _, p := range []string{"cluster.local/ns//sa/ui", "/ns/kubeflow/sa/ui", "cluster.local/ns/kubeflow/sa/"} {
		errs := config.ValidatePrincipal(path, p)
		if assert.Len(t, errs, 1, p) {
			assert.Equal(t, fmt.Sprintf("authorization.principals.ingressGateway: Invalid value: %q: must look like <trust domain>/ns/<namespace>/sa/<service account>", p), errs[0].Error())
		}
	}
}

func ExampleParsePrincipal() {
	_, namespace, serviceAccount, err := config.ParsePrincipal("cluster.local/ns/kubeflow/sa/ml-pipeline-ui")
	fmt.Println(namespace, serviceAccount, err)
	_, _, _, err = config.ParsePrincipal("spiffe://cluster.local/ns/kubeflow/sa/ml-pipeline-ui")
	fmt.Println(err)
	// Output:
	// kubeflow ml-pipeline-ui <nil>
	// "spiffe://cluster.local/ns/kubeflow/sa/ml-pipeline-ui": must look like <trust domain>/ns/<namespace>/sa/<service account>
}
