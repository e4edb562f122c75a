package waypoint_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// istioKeys is the part of m in Istio's domain (istio.io/... and *.istio.io/...).
func istioKeys(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if prefix, _, ok := strings.Cut(k, "/"); ok && (prefix == "istio.io" || strings.HasSuffix(prefix, ".istio.io")) {
			out[k] = v
		}
	}
	return out
}

// Under a revision the waypoint Gateway names it, as istioctl waypoint generate --revision does
// (istiod picks the deploying control plane by it, tags included); without one it names none. The
// patch ConfigMap never does: istiod's ConfigMap informer is not filtered by revision, and
// whatever Istio-domain metadata an object carries is what the runner keeps exactly.
func TestTheWaypointNamesTheConfiguredRevisionAndThePatchNone(t *testing.T) {
	for _, tc := range []struct {
		config string
		want   map[string]string
	}{
		{"mesh: {waypoint: {seccompPatch: true}}\n", map[string]string{"istio.io/waypoint-for": "service"}},
		{"mesh: {revision: canary, waypoint: {seccompPatch: true}}\n", map[string]string{"istio.io/waypoint-for": "service", "istio.io/rev": "canary"}},
	} {
		cfg := fixture.Config(t, tc.config)
		gw := waypoint.Gateway(cfg, ns)
		assert.Equal(t, tc.want, istioKeys(gw.Labels), tc.config)
		assert.Empty(t, istioKeys(gw.Annotations), tc.config)
		cm := waypoint.SeccompConfigMap(cfg, ns)
		assert.Empty(t, istioKeys(cm.Labels), tc.config)
		assert.Empty(t, istioKeys(cm.Annotations), tc.config)
	}
}
