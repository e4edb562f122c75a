package authz_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// Every policy stays global under a revision: istiod reads a policy labelled istio.io/rev only in
// exactly that revision (never through a tag), and one without the label in all of them, so the
// label could only take a policy away from the ztunnel or proxies of another revision. The one
// key of Istio's domain a policy carries is istio.io/dry-run: "false".
func TestPoliciesCarryNoRevisionUnderARevision(t *testing.T) {
	for _, mode := range []string{"ambient", "sidecar"} {
		cfg := fixture.Config(t, "mesh: {mode: "+mode+", revision: canary}\nauthorization: {contributors: plugin}\n")
		r := generate(t, cfg, []client.Object{kfamBinding("bob@example.com", "edit")}...)
		require.NotEmpty(t, r.Objects)
		for _, obj := range r.Objects {
			for k := range obj.GetLabels() {
				assert.False(t, strings.Contains(k, "istio.io"), "%s %s: label %s", mode, obj.GetName(), k)
			}
			var istio []string
			for k, v := range obj.GetAnnotations() {
				if strings.Contains(k, "istio.io") {
					istio = append(istio, k+"="+v)
				}
			}
			assert.Equal(t, []string{"istio.io/dry-run=false"}, istio, "%s %s", mode, obj.GetName())
		}
	}
}
