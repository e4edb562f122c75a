package runner_test

// Drift: another writer changes what a protective object means (its spec, a ConfigMap key, the
// istio.io/dry-run annotation). The runner restores exactly the desired object in the same call
// and names the writer; a label stays only if the restore succeeds, and routing waits a call. The
// FINDING comments keep the security review's finding of each scenario.

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

const dryRun = "istio.io/dry-run"

// FINDING (fail-open, persistent and silent; anyone who may update AuthorizationPolicies, e.g. a
// GitOps tool or an admin "trying dry-run"). Istio reads the annotation istio.io/dry-run: "true"
// on an AuthorizationPolicy as "do not enforce": istiod does not send such a policy to ztunnel at
// all (istio/istio pilot/pkg/serviceregistry/ambient/authorization.go, convertAuthorizationPolicy)
// and proxies turn it into shadow rules only (pilot/pkg/security/authz/builder/builder.go,
// isDryRun). On the ztunnel policy that leaves ambient pods with no ALLOW policy (ztunnel admits
// every caller); on the owner policy it leaves the waypoint without the owner check. The
// intactness model looked only at spec, so the annotated policies counted as intact. Now the
// policies state istio.io/dry-run: "false", and another writer's value is drift: restored in the
// same call and reported with that writer's field manager.
func TestDryRunAnnotationOnThePoliciesIsRestoredAndReported(t *testing.T) {
	for _, name := range []string{ztunnelName, ownerName} {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			pol := m.policy(name)
			require.Equal(t, "false", pol.Annotations[dryRun], "the policy states that it is enforced")
			pol.Annotations[dryRun] = "true"
			require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
			res := m.apply()
			require.NoError(t, res.Err())
			assert.Equal(t, "false", m.policy(name).Annotations[dryRun],
				"the policy stays in dry-run, i.e. not enforced, while the namespace stays enrolled (labels %v, writes %v)", m.labels(), m.writes)
			warnings := strings.Join(res.Warnings(), "\n")
			assert.Contains(t, warnings, "AuthorizationPolicy.security.istio.io/"+name+" was changed by another writer (gitops set metadata.annotations.istio.io/dry-run)")
			assert.NotContains(t, warnings, "the plugin's own field manager", "the plugin's own manager changed nothing: %s", warnings)
			restoredNotRouted(t, m.labels())

			// Restored means no drift left: the next call routes again, the one after writes nothing.
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())
			assert.Empty(t, m.converged().Warnings())
		})
	}
}

// FINDING (fail-open window + silent drift, namespace editor). The plugin's own seccomp
// ConfigMap was not checked for drift beyond the values it sets: the intact check read only
// spec, and a ConfigMap has data. A key another writer adds (istiod reads "service",
// "serviceAccount", "horizontalPodAutoscaler" and "podDisruptionBudget" next to "deployment",
// each a patch of what it generates for the waypoint) counted as unchanged forever, with no
// warning, while use-waypoint stayed. Now data and binaryData are content like spec: another
// writer's key is restored away in the same call and reported.
func TestAKeyAddedToTheWaypointPatchConfigMapIsRestoredAndReported(t *testing.T) {
	m := newMesh(t).withPatch()
	m.enrol()
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "waypoint-seccomp"}
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	want := cm.Data
	cm.Data = map[string]string{"deployment": cm.Data["deployment"], "service": "spec:\n  type: LoadBalancer\n"}
	require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))
	res := m.apply()
	require.NoError(t, res.Err())
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	assert.Equal(t, want, cm.Data, "another writer's patch of the waypoint stays in the ConfigMap istiod applies")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp was changed by another writer (kubectl-edit set data.service)")
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())

	// A changed value of the plugin's own key is restored and reported the same way.
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	cm.Data["deployment"] = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"
	require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))
	res = m.apply()
	require.NoError(t, res.Err())
	require.NoError(t, m.c.Get(context.Background(), key, cm))
	assert.Equal(t, want, cm.Data)
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp was changed by another writer (kubectl-edit set data.deployment)")
	restoredNotRouted(t, m.labels())
}

// Another writer switches the ztunnel policy to AUDIT, adds a selector or targetRefs: each makes
// istiod stop enforcing it at ztunnel. The runner restores exactly the desired spec, names the
// other field manager, keeps dataplane-mode, withholds routing for the call, routes again on the
// next, and is quiet after.
func TestDriftOfTheZtunnelPolicyIsRestoredAndReported(t *testing.T) {
	cases := map[string]func(*istiosecurityv1.AuthorizationPolicy){
		"action AUDIT": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.Action = securityv1beta1.AuthorizationPolicy_AUDIT
		},
		"action DENY": func(p *istiosecurityv1.AuthorizationPolicy) { p.Spec.Action = securityv1beta1.AuthorizationPolicy_DENY },
		"selector": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.Selector = &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"app": "nothing"}}
		},
		"targetRefs": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.TargetRefs = []*typev1beta1.PolicyTargetReference{{Kind: "Service", Name: "nothing"}}
		},
		"extra rule": func(p *istiosecurityv1.AuthorizationPolicy) {
			p.Spec.Rules = append(p.Spec.Rules, &securityv1beta1.Rule{})
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMesh(t)
			m.enrol()
			want := m.policy(ztunnelName).Spec.DeepCopy()
			pol := m.policy(ztunnelName)
			change(pol)
			require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))

			res := m.apply()
			require.NoError(t, res.Err())
			assert.Contains(t, strings.Join(res.Warnings(), "\n"), "AuthorizationPolicy.security.istio.io/"+ztunnelName+" was changed by another writer (gitops set spec.")
			assert.NotContains(t, strings.Join(res.Warnings(), "\n"), "the plugin's own field manager", "only gitops changed it")
			got := m.policy(ztunnelName)
			assert.Equal(t, want.String(), got.Spec.String(), "exactly the desired spec")
			restoredNotRouted(t, m.labels())
			require.NoError(t, m.apply().Err())
			enrolled(t, m.labels())

			assert.Empty(t, m.converged("restored once, quiet after").Warnings())
		})
	}
}

// Server-side apply by another manager that forces a field away from the plugin is drift too.
func TestForcedApplyOfAnotherManagerIsRestored(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
		"metadata": map[string]any{"name": ownerName, "namespace": ns},
		"spec":     map[string]any{"action": "AUDIT"},
	}}
	require.NoError(t, m.c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("argocd"), client.ForceOwnership))
	res := m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "argocd set spec.action")
	assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ownerName).Spec.Action)
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	m.converged()
}

// The restore is an Update with the observed resourceVersion as precondition: it never overwrites
// a version the runner did not see.
func TestRestoreUsesAResourceVersionPrecondition(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.setAction(ztunnelName, securityv1beta1.AuthorizationPolicy_AUDIT, "gitops")
	observedRV := m.policy(ztunnelName).ResourceVersion
	var sentRV string
	m.fail = func(verb string, obj any) error {
		if u, ok := obj.(*unstructured.Unstructured); ok && verb == "update" {
			sentRV = u.GetResourceVersion()
		}
		return nil
	}
	require.NoError(t, m.apply().Err())
	assert.Equal(t, observedRV, sentRV)
	assert.Contains(t, m.writes, "update AuthorizationPolicy/"+ztunnelName)
}

// Drift of the waypoint Gateway (an extra listener, another class, infrastructure) is restored the
// same way.
func TestDriftOfTheWaypointIsRestored(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	gw := &gatewayv1.Gateway{}
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	want := gw.Spec.DeepCopy()
	gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: "open", Port: 80, Protocol: gatewayv1.HTTPProtocolType})
	require.NoError(t, m.c.Update(context.Background(), gw, client.FieldOwner("kubectl-edit")))
	res := m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "Gateway.gateway.networking.k8s.io/waypoint was changed by another writer (kubectl-edit set spec.listeners")
	require.NoError(t, m.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw))
	assert.Equal(t, want.Listeners, gw.Spec.Listeners)
	assert.NotEmpty(t, gw.Status.Conditions, "istiod's status survives the restore")
}

// After a restore, the plugin's own Update holds the fields it put back. When the plugin later
// stops setting one of them (the owner policy loses its targetRefs in sidecar mode), apply alone
// would leave it; the runner sees it and converges within three calls, then stays quiet.
func TestFieldsOfARestoreGoWhenThePluginStopsSettingThem(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	pol := m.policy(ownerName)
	pol.Spec.TargetRefs[0].Name = "elsewhere"
	require.NoError(t, m.c.Update(context.Background(), pol, client.FieldOwner("gitops")))
	require.NoError(t, m.apply().Err())
	require.Equal(t, "waypoint", m.policy(ownerName).Spec.TargetRefs[0].Name)

	m.configure(config.ModeSidecar)
	var warnings []string
	for range 3 {
		res := m.apply()
		require.NoError(t, res.Err())
		warnings = append(warnings, res.Warnings()...)
	}
	assert.Empty(t, m.policy(ownerName).Spec.TargetRefs)
	assert.NotContains(t, strings.Join(warnings, "\n"), "another writer", "the plugin's own Update is no other writer")
	m.converged()
}

// The restore succeeded but taking ownership back failed: the spec is exactly the desired one,
// so dataplane-mode stays; routing waits for the next call, as after any restore.
func TestRestoredButNotReownedKeepsLabels(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	m.setAction(ztunnelName, securityv1beta1.AuthorizationPolicy_AUDIT, "gitops")
	m.fail = failVerb("apply", "AuthorizationPolicy/"+ztunnelName)
	require.Error(t, m.apply().Err())
	assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ztunnelName).Spec.Action)
	restoredNotRouted(t, m.labels())
	m.fail = nil
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	m.converged()
}

// When the restore fails, the drifted object does not protect: routing comes off at once, and
// dataplane-mode stays only for running pods.
func TestFailedRestoreWithdrawsRouting(t *testing.T) {
	for _, withPod := range []bool{true, false} {
		m := newMesh(t)
		m.enrol()
		if withPod {
			m.addPod("app", nil)
		}
		m.setAction(ztunnelName, securityv1beta1.AuthorizationPolicy_AUDIT, "gitops")
		m.fail = failPolicyWrites(ztunnelName)
		res := m.apply()
		require.ErrorContains(t, res.Err(), "restoring AuthorizationPolicy.security.istio.io/"+ztunnelName)
		labels := m.labels()
		assert.NotContains(t, labels, useWaypoint)
		assert.NotContains(t, labels, ingressUseWaypoint)
		if withPod {
			assert.Equal(t, "ambient", labels[dataplaneMode])
		} else {
			assert.NotContains(t, labels, dataplaneMode)
		}
		m.fail = nil
		require.NoError(t, m.apply().Err())
		assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ztunnelName).Spec.Action)
		assert.Equal(t, "ambient", m.labels()[dataplaneMode])
	}
}

// With the opt-in on, a foreign key in the plugin's patch ConfigMap that cannot be restored (the
// restoring write fails) takes the namespace off the waypoint at once: istiod applies every key
// to the waypoint it builds, so until the ConfigMap is restored the waypoint may not be the one
// the owner policy runs in. The call whose restore succeeds still withholds routing (istiod may not
// have rebuilt the waypoint yet); the next one routes again.
func TestAnUnrestoredPatchConfigMapWithdrawsTheRouting(t *testing.T) {
	t.Parallel()
	m := newMesh(t).withPatch()
	m.enrol()
	cm := m.configMap("waypoint-seccomp")
	want := maps.Clone(cm.Data)
	cm.Data["deployment"] = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        image: evil/proxy\n"
	cm.Data["extra"] = "x"
	require.NoError(t, m.c.Update(context.Background(), cm, client.FieldOwner("kubectl-edit")))

	m.fail = func(verb string, obj any) error {
		if describe(obj) == "ConfigMap/waypoint-seccomp" {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	}
	res := m.apply()
	require.Error(t, res.Err())
	labels := m.labels()
	assert.Empty(t, labels[useWaypoint], "routed through a waypoint istiod builds from another writer's patch")
	assert.Empty(t, labels[ingressUseWaypoint])
	assert.Equal(t, "ambient", labels[dataplaneMode], "the ztunnel policy still protects the pods")
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "ConfigMap/waypoint-seccomp was changed by another writer (kubectl-edit set data.deployment, data.extra)")

	m.fail = nil
	res = m.apply()
	require.NoError(t, res.Err())
	assert.Equal(t, want, m.configMap("waypoint-seccomp").Data, "the foreign key and the changed value are gone")
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
}

// A namespace already routed through the waypoint whose owner policy lost its targetRefs to
// another writer, while the ztunnel policy is damaged too, gets the owner policy back on the
// waypoint in the same call, and routing returns on the next: it is never routed to a waypoint
// without its owner policy
// (found by the property test at 10,000 sequences).
func TestRoutedNamespaceGetsItsOwnerPolicyBackOnTheWaypointAtOnce(t *testing.T) {
	m := newMesh(t)
	m.enrol()
	owner := m.policy(ownerName)
	owner.Spec.TargetRefs = nil
	require.NoError(t, m.c.Update(context.Background(), owner, client.FieldOwner("kubectl-edit")))
	z := m.policy(ztunnelName)
	z.Spec.Action = securityv1beta1.AuthorizationPolicy_CUSTOM
	z.Spec.ActionDetail = &securityv1beta1.AuthorizationPolicy_Provider{Provider: &securityv1beta1.AuthorizationPolicy_ExtensionProvider{Name: "x"}}
	require.NoError(t, m.c.Update(context.Background(), z, client.FieldOwner("kubectl-edit")))
	require.NoError(t, m.apply().Err())
	assert.NotEmpty(t, m.policy(ownerName).Spec.TargetRefs, "attached to the waypoint again")
	assert.NotContains(t, m.labels(), useWaypoint, "not routed while the observed policy was detached")
	assert.Equal(t, "ambient", m.labels()[dataplaneMode])
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())
	assert.Equal(t, securityv1beta1.AuthorizationPolicy_ALLOW, m.policy(ztunnelName).Spec.Action)
}
