package v1alpha1_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	psaapi "k8s.io/pod-security-admission/api"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// An L4 exception's ports are TCP ports: 1 to 65535, both ends included.
func TestL4ExceptionPortRange(t *testing.T) {
	for port, ok := range map[int]bool{0: false, 1: true, 15020: true, 65535: true, 65536: false, -1: false} {
		t.Run(strconv.Itoa(port), func(t *testing.T) {
			_, err := config.Parse([]byte(header + "authorization: {l4Exceptions: [{namespaces: [monitoring], ports: [" + strconv.Itoa(port) + "]}]}\n"))
			if ok {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "authorization.l4Exceptions[0].ports[0]")
			assert.Contains(t, err.Error(), "must be 1 to 65535")
		})
	}
}

// An override on a namespace label the admin sets is valid, and is kept as written.
func TestNamespaceSelectorOverrideIsValid(t *testing.T) {
	c, err := config.Parse([]byte(header + "podSecurity: {overrides: [{namespaceSelector: {matchLabels: {example.com/tier: gpu}}, minimumEnforce: privileged}]}\n"))
	require.NoError(t, err)
	require.Len(t, c.PodSecurity.Overrides, 1)
	o := c.PodSecurity.Overrides[0]
	assert.Equal(t, psaapi.LevelPrivileged, o.MinimumEnforce)
	assert.Equal(t, map[string]string{"example.com/tier": "gpu"}, o.NamespaceSelector.MatchLabels)
	assert.Empty(t, o.Profiles)
}

// A SPIFFE trust domain is at most 255 characters.
func TestTrustDomainLength(t *testing.T) {
	path := field.NewPath("mesh", "trustDomain")
	longest := strings.Repeat("a", 255)
	assert.Empty(t, config.ValidateTrustDomain(path, longest))
	errs := config.ValidateTrustDomain(path, "a"+longest)
	if assert.Len(t, errs, 1) {
		assert.Contains(t, errs[0].Error(), "mesh.trustDomain")
	}
}

// Each part of a principal is checked, and the error says which.
func TestPrincipalParts(t *testing.T) {
	path := field.NewPath("p")
	assert.Empty(t, config.ValidatePrincipal(path, "cluster.local/ns/kubeflow/sa/ml-pipeline-ui"))
	for p, want := range map[string]string{
		"cluster.local/ns/kubeflow/sa/Bad_SA":         "service account",
		"cluster.local/ns/Kubeflow/sa/ui":             "namespace",
		"Cluster.Local/ns/kubeflow/sa/ui":             "trust domain",
		"cluster.local/namespace/kubeflow/sa/":        "must look like",
		"cluster.local/ns/kubeflow/serviceaccount/ui": "must look like",
		"cluster.local/ns/kubeflow/sa/ui/x":           "must look like",
	} {
		errs := config.ValidatePrincipal(path, p)
		if assert.Len(t, errs, 1, p) {
			assert.Contains(t, errs[0].Error(), want, p)
			assert.Contains(t, errs[0].Error(), `"`+p+`"`, p)
		}
	}
}
