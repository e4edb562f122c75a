package ssa

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The rule is Istio's domain, not a list of keys: every prefix that is istio.io or ends in
// .istio.io, and nothing that merely contains it.
func TestIsMeaningKeyIsIstiosDomain(t *testing.T) {
	for key, want := range map[string]bool{
		"istio.io/rev":                                     true,
		"istio.io/dry-run":                                 true,
		"istio.io/some-future-key":                         true,
		"sidecar.istio.io/proxyImage":                      true,
		"proxy.istio.io/config":                            true,
		"networking.istio.io/service-type":                 true,
		"gateway.istio.io/controller-version":              true,
		"readiness.status.sidecar.istio.io/periodSeconds":  true,
		"topology.istio.io/network":                        true,
		"istio.io":                                         false, // no prefix at all
		"rev":                                              false,
		"istio-injection":                                  false, // the namespace label; not a prefixed key
		"istio.io.example.com/rev":                         false,
		"notistio.io/rev":                                  false,
		"example.com/istio.io":                             false,
		"gateway.networking.k8s.io/gateway-name":           false,
		"app.kubernetes.io/managed-by":                     false,
		"profile-plugins.kubeflow-ambient.io/desired-hash": false,
	} {
		assert.Equal(t, want, IsMeaningKey(key), key)
	}
}

func policyWith(labels, annotations map[string]string, entries ...metav1.ManagedFieldsEntry) *istiosecurityv1.AuthorizationPolicy {
	return &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels, Annotations: annotations, ManagedFields: entries}}
}

// Meaning metadata is content: a label or annotation of Istio's domain that another manager
// holds and the plugin's apply does not is foreign, whichever key it is; other metadata is not.
func TestForeignFieldsCountsMeaningMetadata(t *testing.T) {
	const mine = "profile-plugins/authz"
	apply, update := metav1.ManagedFieldsOperationApply, metav1.ManagedFieldsOperationUpdate
	ours := entry(mine, apply, "", `{"f:metadata":{"f:annotations":{"f:istio.io/dry-run":{}},"f:labels":{"f:app.kubernetes.io/managed-by":{}}},"f:spec":{"f:rules":{}}}`)
	body := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{"istio.io/dry-run": "false"}, "labels": map[string]any{"app.kubernetes.io/managed-by": "profile-plugins"}},
		"spec":     map[string]any{"rules": []any{}},
	}
	for name, c := range map[string]struct {
		labels, annotations map[string]string
		entries             []metav1.ManagedFieldsEntry
		body                map[string]any
		want                map[string][]string
	}{
		"a label the plugin does not set, added by an Update": {
			labels:  map[string]string{"istio.io/rev": "off"},
			entries: []metav1.ManagedFieldsEntry{ours, entry("kubectl-edit", update, "", `{"f:metadata":{"f:labels":{"f:istio.io/rev":{}}}}`)},
			want:    map[string][]string{"kubectl-edit": {"metadata.labels.istio.io/rev"}},
		},
		"a label the plugin does not set, applied by another manager": {
			labels:  map[string]string{"istio.io/rev": "off"},
			entries: []metav1.ManagedFieldsEntry{ours, entry("argocd", apply, "", `{"f:metadata":{"f:labels":{"f:istio.io/rev":{}}}}`)},
			want:    map[string][]string{"argocd": {"metadata.labels.istio.io/rev"}},
		},
		"an annotation of any Istio prefix": {
			annotations: map[string]string{"sidecar.istio.io/proxyImage": "evil/proxy", "networking.istio.io/service-type": "LoadBalancer"},
			entries: []metav1.ManagedFieldsEntry{ours, entry("kubectl-edit", update, "",
				`{"f:metadata":{"f:annotations":{"f:sidecar.istio.io/proxyImage":{},"f:networking.istio.io/service-type":{}}}}`)},
			want: map[string][]string{"kubectl-edit": {"metadata.annotations.networking.istio.io/service-type", "metadata.annotations.sidecar.istio.io/proxyImage"}},
		},
		// An Update that changes a value takes the field over from the plugin's apply.
		"a value the plugin sets, changed by an Update": {
			annotations: map[string]string{"istio.io/dry-run": "true"},
			entries: []metav1.ManagedFieldsEntry{
				entry(mine, apply, "", `{"f:spec":{"f:rules":{}}}`),
				entry("gitops", update, "", `{"f:metadata":{"f:annotations":{"f:istio.io/dry-run":{}}}}`),
			},
			want: map[string][]string{"gitops": {"metadata.annotations.istio.io/dry-run"}},
		},
		"a value the plugin sets, applied alike by another manager": {
			annotations: map[string]string{"istio.io/dry-run": "false"},
			entries:     []metav1.ManagedFieldsEntry{ours, entry("argocd", apply, "", `{"f:metadata":{"f:annotations":{"f:istio.io/dry-run":{}}}}`)},
			want:        map[string][]string{},
		},
		"other metadata of another writer": {
			labels:      map[string]string{"team": "a", "istio-injection": "enabled"},
			annotations: map[string]string{"example.com/istio.io": "x"},
			entries: []metav1.ManagedFieldsEntry{ours, entry("kubectl-edit", update, "",
				`{"f:metadata":{"f:labels":{"f:team":{},"f:istio-injection":{}},"f:annotations":{"f:example.com/istio.io":{}}}}`)},
			want: map[string][]string{},
		},
		// Nobody holds the key (managedFields were cleared): nobody can be named, and nothing
		// proves it is the plugin's.
		"a key no entry holds": {
			labels:      map[string]string{"istio.io/rev": "off", "team": "a"},
			annotations: map[string]string{"istio.io/dry-run": "false"},
			want:        map[string][]string{Unrecorded: {"metadata.labels.istio.io/rev"}},
		},
		"a key no entry holds, without a body": {
			labels:      map[string]string{"istio.io/rev": "off"},
			annotations: map[string]string{"istio.io/dry-run": "false"},
			body:        map[string]any{},
			want:        map[string][]string{Unrecorded: {"metadata.annotations.istio.io/dry-run", "metadata.labels.istio.io/rev"}},
		},
		"a key only a status writer holds": {
			annotations: map[string]string{"istio.io/dry-run": "false", "gateway.istio.io/controller-version": "5"},
			entries:     []metav1.ManagedFieldsEntry{ours, entry("istiod", apply, "status", `{"f:metadata":{"f:annotations":{"f:gateway.istio.io/controller-version":{}}}}`)},
			want:        map[string][]string{Unrecorded: {"metadata.annotations.gateway.istio.io/controller-version"}},
		},
		// The plugin's own restoring Update keeps a key its apply no longer sets.
		"a key the plugin's own Update holds and the body drops": {
			annotations: map[string]string{"istio.io/dry-run": "false"},
			entries: []metav1.ManagedFieldsEntry{
				entry(mine, apply, "", `{"f:metadata":{"f:annotations":{"f:istio.io/dry-run":{}}}}`),
				entry(mine, update, "", `{"f:metadata":{"f:annotations":{"f:istio.io/dry-run":{}}}}`),
			},
			body: map[string]any{"spec": map[string]any{"rules": []any{}}},
			want: map[string][]string{mine: {"metadata.annotations.istio.io/dry-run"}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := body
			if c.body != nil {
				b = c.body
				if len(b) == 0 {
					b = nil
				}
			}
			assert.Equal(t, c.want, ForeignFields(policyWith(c.labels, c.annotations, c.entries...), mine, b))
		})
	}
}

// A meaning key applied under the plugin's own manager name and not in the body is an extra,
// like a spec field; the same key in the body is not.
func TestApplyExtrasCountsMeaningMetadata(t *testing.T) {
	const mine = "profile-plugins/waypoint"
	obj := withEntry(mine, metav1.ManagedFieldsOperationApply,
		`{"f:metadata":{"f:labels":{"f:istio.io/rev":{},"f:istio.io/waypoint-for":{},"f:team":{}},"f:annotations":{"f:sidecar.istio.io/proxyImage":{}}}}`)
	body := map[string]any{"metadata": map[string]any{"labels": map[string]any{"istio.io/waypoint-for": "service"}}}
	assert.Equal(t, []string{"metadata.annotations.sidecar.istio.io/proxyImage", "metadata.labels.istio.io/rev"}, ApplyExtras(obj, mine, body))
	body["metadata"].(map[string]any)["labels"].(map[string]any)["istio.io/rev"] = "canary"
	body["metadata"].(map[string]any)["annotations"] = map[string]any{"sidecar.istio.io/proxyImage": "x"}
	assert.Empty(t, ApplyExtras(obj, mine, body))
}

// A removal leaves no field manager behind, so it is found by comparing with the body: only the
// meaning keys the body sets count.
func TestMissingMeaningListsTheMeaningKeysTheBodySetsAndTheObjectLacks(t *testing.T) {
	body := map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{"istio.io/waypoint-for": "service", "istio.io/rev": "canary", "app.kubernetes.io/managed-by": "profile-plugins"},
		"annotations": map[string]any{"istio.io/dry-run": "false"},
	}}
	obj := policyWith(map[string]string{"istio.io/rev": "off"}, nil)
	assert.Equal(t, []string{"metadata.annotations.istio.io/dry-run", "metadata.labels.istio.io/waypoint-for"}, MissingMeaning(obj, body),
		"a changed value is not missing; a missing label outside the domain is Holds' business")
	assert.Empty(t, MissingMeaning(obj, map[string]any{}))
}

// The restore leaves the object's meaning metadata exactly as desired: keys the body does not set
// go, keys it sets take its value; metadata outside the domain is kept.
func TestRestoredBodyKeepsMeaningMetadataExactlyAsDesired(t *testing.T) {
	cur := policyWith(
		map[string]string{"istio.io/rev": "off", "istio.io/waypoint-for": "none", "team": "a"},
		map[string]string{"sidecar.istio.io/proxyImage": "evil/proxy", "istio.io/dry-run": "true", "note": "x"})
	desired := map[string]any{"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy", "metadata": map[string]any{
		"name":        "p",
		"labels":      map[string]any{"istio.io/waypoint-for": "service"},
		"annotations": map[string]any{"istio.io/dry-run": "false"},
	}}
	u, err := RestoredBody(cur, desired)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"istio.io/waypoint-for": "service", "team": "a"}, u.GetLabels())
	assert.Equal(t, map[string]string{"istio.io/dry-run": "false", "note": "x"}, u.GetAnnotations())
}

// WithoutMeaning drops the meaning keys MissingMeaning names from a copy of the body, so the rest
// can be compared on its own; the body itself keeps them, and without paths it is returned as is.
func TestWithoutMeaningDropsTheNamedMeaningKeysFromACopy(t *testing.T) {
	body := map[string]any{"kind": "AuthorizationPolicy", "metadata": map[string]any{
		"name":        "ns-owner-access-istio",
		"labels":      map[string]any{"istio.io/rev": "canary", "app.kubernetes.io/managed-by": "profile-plugins"},
		"annotations": map[string]any{"istio.io/dry-run": "false"},
	}}
	got := WithoutMeaning(body, []string{"metadata.labels.istio.io/rev", "metadata.annotations.istio.io/dry-run", "spec.action"})
	assert.Equal(t, map[string]any{"kind": "AuthorizationPolicy", "metadata": map[string]any{
		"name":        "ns-owner-access-istio",
		"labels":      map[string]any{"app.kubernetes.io/managed-by": "profile-plugins"},
		"annotations": map[string]any{},
	}}, got, "a path that names no meaning key is skipped")
	assert.Equal(t, "canary", body["metadata"].(map[string]any)["labels"].(map[string]any)["istio.io/rev"], "the body is not changed")
	assert.Equal(t, "false", body["metadata"].(map[string]any)["annotations"].(map[string]any)["istio.io/dry-run"])

	same := WithoutMeaning(body, nil)
	same["marker"] = true
	assert.Equal(t, true, body["marker"], "without paths the body itself comes back")
}
