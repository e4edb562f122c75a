package runner_test

// Istio-domain metadata (internal/ssa, "Content"): every label and annotation of a managed object
// whose key is istio.io/... or *.istio.io/... is content, kept exactly as the plugin's object says.
// Another writer adding, changing or removing one is drift: restored in the same call, reported
// with the writer and the key, and routing waits for the next call, as for a spec field.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

const (
	revLabel        = "istio.io/rev"
	waypointFor     = "istio.io/waypoint-for"
	proxyImage      = "sidecar.istio.io/proxyImage"
	serviceType     = "networking.istio.io/service-type"
	unlistedKey     = "security.istio.io/not-yet-invented"
	policyRefPrefix = "AuthorizationPolicy.security.istio.io/"
	gatewayRef      = "Gateway.gateway.networking.k8s.io/waypoint"
	configMapRef    = "ConfigMap/waypoint-seccomp"
	labelsField     = "labels"
	annotsField     = "annotations"
	writerUpdate    = "kubectl-edit"
	writerApplied   = "argocd"
)

// metaDrift is one change of a managed object's Istio-domain metadata.
type metaDrift struct {
	object func(*mesh) client.Object
	ref    string // as warnings name the object
	field  string // labels or annotations
	key    string
	value  string // "" removes the key
	want   string // the value the plugin sets, "" for a key it does not set
}

func metaDrifts() map[string]metaDrift {
	ztunnel := func(m *mesh) client.Object { return m.policy(ztunnelName) }
	owner := func(m *mesh) client.Object { return m.policy(ownerName) }
	gateway := func(m *mesh) client.Object { return m.gateway() }
	return map[string]metaDrift{
		// The finding: istiod ignores a policy whose istio.io/rev is not its revision.
		"ztunnel policy labelled istio.io/rev=off": {ztunnel, policyRefPrefix + ztunnelName, labelsField, revLabel, "off", ""},
		"owner policy labelled istio.io/rev=off":   {owner, policyRefPrefix + ownerName, labelsField, revLabel, "off", ""},
		"waypoint labelled istio.io/rev=off":       {gateway, gatewayRef, labelsField, revLabel, "off", ""},
		// A label the plugin sets, changed and removed.
		"waypoint for no traffic":                {gateway, gatewayRef, labelsField, waypointFor, "none", "service"},
		"waypoint-for removed from the waypoint": {gateway, gatewayRef, labelsField, waypointFor, "", "service"},
		// Annotations the plugin does not set: copied onto the waypoint's pods and Service.
		"waypoint runs another proxy image":     {gateway, gatewayRef, annotsField, proxyImage, "evil/proxy:1", ""},
		"waypoint Service of type LoadBalancer": {gateway, gatewayRef, annotsField, serviceType, "LoadBalancer", ""},
		// An annotation the plugin sets, changed and removed.
		"owner policy in dry-run":          {owner, policyRefPrefix + ownerName, annotsField, dryRun, "true", "false"},
		"dry-run removed from the ztunnel": {ztunnel, policyRefPrefix + ztunnelName, annotsField, dryRun, "", "false"},
		// No list names this key: the domain does.
		"a key of Istio's domain nobody lists": {ztunnel, policyRefPrefix + ztunnelName, annotsField, unlistedKey, "x", ""},
	}
}

// setMeta sets (or, with value "", removes) one label or annotation of obj in place.
func setMeta(obj metav1.Object, field, key, value string) {
	m := obj.GetLabels()
	if field == annotsField {
		m = obj.GetAnnotations()
	}
	if m == nil {
		m = map[string]string{}
	}
	if value == "" {
		delete(m, key)
	} else {
		m[key] = value
	}
	if field == annotsField {
		obj.SetAnnotations(m)
	} else {
		obj.SetLabels(m)
	}
}

func metaValue(obj metav1.Object, field, key string) (string, bool) {
	m := obj.GetLabels()
	if field == annotsField {
		m = obj.GetAnnotations()
	}
	v, ok := m[key]
	return v, ok
}

// Every class of key, by an Update (kubectl edit) and by another manager's forced apply: the key
// is back to what the plugin says in the same call, the warning names the writer and the key,
// ambient stays, routing waits a call, and the call after writes nothing.
func TestIstioDomainMetadataOfAnotherWriterIsRestoredAndReported(t *testing.T) {
	for name, d := range metaDrifts() {
		for _, writer := range []string{writerUpdate, writerApplied} {
			if writer == writerApplied && d.value == "" {
				continue // an apply removes only what its manager owned; Updates remove
			}
			t.Run(name+" by "+writer, func(t *testing.T) {
				m := newMesh(t)
				m.enrol()
				obj := d.object(m)
				have, _ := metaValue(obj, d.field, d.key)
				require.Equal(t, d.want, have, "the plugin's own value before the change")
				if writer == writerUpdate {
					setMeta(obj, d.field, d.key, d.value)
					require.NoError(t, m.c.Update(context.Background(), obj, client.FieldOwner(writer)))
				} else {
					// kubectl apply --server-side --force-conflicts of the object with the key.
					fixture.ApplyAs(t, m.c, obj, writer, func(u map[string]any) {
						md := u["metadata"].(map[string]any)
						if md[d.field] == nil {
							md[d.field] = map[string]any{}
						}
						md[d.field].(map[string]any)[d.key] = d.value
					})
				}
				got, _ := metaValue(d.object(m), d.field, d.key)
				require.Equal(t, d.value, got, "the change took effect")

				res := m.apply()
				require.NoError(t, res.Err())
				got, ok := metaValue(d.object(m), d.field, d.key)
				assert.Equal(t, d.want, got, "restored to what the plugin says; writes %v", m.writes)
				assert.Equal(t, d.want != "", ok)
				path := "metadata." + d.field + "." + d.key
				warning := d.ref + " was changed by another writer (" + writer + " set " + path + ")"
				if d.value == "" {
					warning = d.ref + " lost " + path + " to another writer"
				}
				assert.Contains(t, strings.Join(res.Warnings(), "\n"), warning)
				restoredNotRouted(t, m.labels())

				m.program()
				require.NoError(t, m.apply().Err())
				enrolled(t, m.labels())
				assert.Empty(t, m.converged("restored once, quiet after").Warnings())
			})
		}
	}
}

// The same key applied under the plugin's own manager name is drift too (the API server ties no
// identity to a manager name): restored and reported as the own manager's.
func TestIstioDomainMetadataUnderThePluginsOwnManagerIsRestored(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		object  func(*mesh) client.Object
		manager string
	}{
		"ztunnel policy": {func(m *mesh) client.Object { return m.policy(ztunnelName) }, "profile-plugins/authz"},
		"waypoint":       {func(m *mesh) client.Object { return m.gateway() }, "profile-plugins/waypoint"},
	} {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			impersonatedApply(t, m.c, tc.object(m), strings.TrimPrefix(tc.manager, "profile-plugins/"), func(u map[string]any) {
				u["metadata"].(map[string]any)["labels"].(map[string]any)[revLabel] = "off"
			})
			require.Equal(t, "off", tc.object(m).GetLabels()[revLabel])
			res := m.apply()
			require.NoError(t, res.Err())
			assert.NotContains(t, tc.object(m).GetLabels(), revLabel)
			assert.Contains(t, strings.Join(res.Warnings(), "\n"),
				"was changed by a writer using the plugin's own field manager "+tc.manager+" (set metadata.labels.istio.io/rev)")
			restoredNotRouted(t, m.labels())
			m.program()
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())
			m.converged()
		})
	}
}

// Metadata outside Istio's domain is its writer's: kept, no write, no warning, routing stays.
func TestOtherMetadataOfAnotherWriterIsNoDrift(t *testing.T) {
	t.Parallel()
	m := newMesh(t).withPatch()
	m.enrol()
	for _, obj := range []client.Object{m.policy(ztunnelName), m.policy(ownerName), m.gateway(), m.configMap("waypoint-seccomp")} {
		setMeta(obj, labelsField, "team", "ml")
		setMeta(obj, labelsField, "istio-injection", "enabled") // the namespace label's name, on an object: nobody reads it
		setMeta(obj, annotsField, "example.com/istio.io", "note")
		require.NoError(t, m.c.Update(context.Background(), obj, client.FieldOwner(writerUpdate)))
	}
	res := m.converged("another writer's own metadata is no drift")
	assert.NotContains(t, strings.Join(res.Warnings(), "\n"), "writer")
	enrolled(t, m.labels())
	assert.Equal(t, "ml", m.policy(ztunnelName).Labels["team"])
	assert.Equal(t, "note", m.gateway().Annotations["example.com/istio.io"])
}

// The patch ConfigMap is held to the same rule: istiod reads no Istio key on it in a user
// namespace, but the plugin sets none there either, so one that appears is not the plugin's.
func TestIstioDomainMetadataOnThePatchConfigMapIsRestored(t *testing.T) {
	t.Parallel()
	m := newMesh(t).withPatch()
	m.enrol()
	cm := m.configMap("waypoint-seccomp")
	setMeta(cm, labelsField, "gateway.istio.io/defaults-for-class", "istio-waypoint")
	require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner(writerUpdate)))
	res := m.apply()
	require.NoError(t, res.Err())
	assert.NotContains(t, m.configMap("waypoint-seccomp").Labels, "gateway.istio.io/defaults-for-class")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"),
		configMapRef+" was changed by another writer (kubectl-edit set metadata.labels.gateway.istio.io/defaults-for-class)")
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// Under a revision the waypoint's istio.io/rev is the configured one: another writer's value is
// drift, restored to it. The policies stay global (authz's newPolicy says why), so an istio.io/rev
// on one, even the configured revision, is not the plugin's and goes.
func TestUnderARevisionTheWaypointKeepsItAndThePoliciesStayGlobal(t *testing.T) {
	m := newMesh(t)
	m.cfg.Mesh.Revision = "canary"
	m.configure(config.ModeAmbient)
	m.enrol()
	require.Equal(t, "canary", m.gateway().Labels[revLabel])
	require.NotContains(t, m.policy(ztunnelName).Labels, revLabel)
	require.Equal(t, "canary", m.labels()[revLabel])

	gw := m.gateway()
	gw.Labels[revLabel] = "off"
	require.NoError(t, m.c.Update(context.Background(), gw, client.FieldOwner(writerUpdate)))
	pol := m.policy(ztunnelName)
	pol.Labels[revLabel] = "canary"
	require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner(writerUpdate)))

	res := m.apply()
	require.NoError(t, res.Err())
	assert.Equal(t, "canary", m.gateway().Labels[revLabel])
	assert.NotContains(t, m.policy(ztunnelName).Labels, revLabel)
	warnings := strings.Join(res.Warnings(), "\n")
	assert.Contains(t, warnings, gatewayRef+" was changed by another writer (kubectl-edit set metadata.labels.istio.io/rev)")
	assert.Contains(t, warnings, policyRefPrefix+ztunnelName+" was changed by another writer (kubectl-edit set metadata.labels.istio.io/rev)")
	restoredNotRouted(t, m.labels())
	m.program()
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	m.converged()
}
