package authz

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

const (
	kfamNS   = "team-a"
	kfamUser = "bob@example.com"
)

// t0 is when kfam made the binding in these tests; the clock is set relative to it.
var t0 = time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)

// kfamPlugin is the plugin in mode contributors "plugin" with a grace period of grace, at now.
func kfamPlugin(t *testing.T, mode, grace string, now time.Time) *Plugin {
	t.Helper()
	p := New(fixture.Config(t, "mesh: {mode: "+mode+"}\nauthorization: {contributors: plugin, kfamGracePeriod: "+grace+"}\n"))
	p.now = func() time.Time { return now }
	return p
}

// bindingAt is kfam's RoleBinding for bob (edit), created at created.
func bindingAt(created time.Time) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{
		Name: ContributorPolicyName(kfamUser, RoleEdit), Namespace: kfamNS, CreationTimestamp: metav1.NewTime(created),
		Annotations: map[string]string{UserAnnotation: kfamUser, RoleAnnotation: RoleEdit},
	}}
}

// kfamsPolicy is the policy kfam POSTs for bob: no managed labels, no targetRefs.
func kfamsPolicy() *istiosecurityv1.AuthorizationPolicy {
	pol := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{
		Name: ContributorPolicyName(kfamUser, RoleEdit), Namespace: kfamNS,
		Annotations: map[string]string{UserAnnotation: kfamUser, RoleAnnotation: RoleEdit},
	}}
	return pol
}

// pluginsPolicy is bob's policy as this plugin wrote it (the runner's managed labels on it),
// after taking over kfam's: kfam's create entry still holds the annotations they share.
func pluginsPolicy(t *testing.T, p *Plugin) *istiosecurityv1.AuthorizationPolicy {
	t.Helper()
	pol := onlyPluginsPolicy(t, p)
	pol.ManagedFields = append(pol.ManagedFields, metav1.ManagedFieldsEntry{Manager: "access-management", Operation: metav1.ManagedFieldsOperationUpdate})
	return pol
}

// onlyPluginsPolicy is bob's policy as only this plugin ever wrote it.
func onlyPluginsPolicy(t *testing.T, p *Plugin) *istiosecurityv1.AuthorizationPolicy {
	t.Helper()
	pol, err := ContributorPolicy(p.cfg, kfamNS, kfamUser, RoleEdit)
	require.NoError(t, err)
	pol.Labels = map[string]string{plugin.ManagedByLabel: plugin.ManagedByValue, plugin.PluginLabel: PluginName}
	pol.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: plugin.FieldManager(PluginName), Operation: metav1.ManagedFieldsOperationApply}}
	return pol
}

func generateFor(t *testing.T, p *Plugin, observed ...client.Object) plugin.Desired {
	t.Helper()
	d, err := p.Generate(plugin.Target{Namespace: kfamNS, Owner: "owner@example.com", Observed: plugin.Observed{Objects: observed}})
	require.NoError(t, err)
	return d
}

func contributorObject(d plugin.Desired) *istiosecurityv1.AuthorizationPolicy {
	for _, o := range d.Objects {
		if o.GetName() == ContributorPolicyName(kfamUser, RoleEdit) {
			return o.(*istiosecurityv1.AuthorizationPolicy)
		}
	}
	return nil
}

var bobRef = plugin.Ref{GroupKind: policyGK, Name: ContributorPolicyName(kfamUser, RoleEdit)}

// While kfam's binding is younger than the grace period and kfam's policy is not there yet, the
// plugin does not create it, so kfam's POST right after the binding never meets AlreadyExists;
// it says what it waits for, so the Result requeues. Afterwards it creates the policy itself (a
// binding made without kfam, or a POST that failed).
func TestContributorPolicyIsLeftToKfamWhileItsBindingIsYoung(t *testing.T) {
	for _, mode := range []string{"ambient", "sidecar"} {
		d := generateFor(t, kfamPlugin(t, mode, "10s", t0.Add(9*time.Second)), bindingAt(t0))
		assert.Nil(t, contributorObject(d), "%s: created before kfam's POST", mode)
		assert.NotContains(t, d.Adopt, bobRef, mode)
		require.Len(t, d.Waiting, 1, mode)
		assert.Contains(t, d.Waiting[0], "is left to kfam", mode)
		assert.Contains(t, d.Waiting[0], "2026-12-01T14:00:10Z", mode)

		d = generateFor(t, kfamPlugin(t, mode, "10s", t0.Add(10*time.Second)), bindingAt(t0))
		pol := contributorObject(d)
		require.NotNil(t, pol, "%s: the grace period is over", mode)
		assert.Equal(t, []string{kfamUser}, pol.Spec.Rules[0].When[0].Values, mode)
		assert.Contains(t, d.Adopt, bobRef, mode)
		assert.Empty(t, d.Waiting, mode)
	}
}

// kfam's policy, once POSTed, is taken over at once, young binding or not.
func TestKfamsPolicyIsTakenOverAtOnce(t *testing.T) {
	for _, now := range []time.Time{t0, t0.Add(time.Hour)} {
		d := generateFor(t, kfamPlugin(t, "ambient", "10s", now), bindingAt(t0), kfamsPolicy())
		pol := contributorObject(d)
		require.NotNil(t, pol)
		require.Len(t, pol.Spec.TargetRefs, 1, "taken over onto the waypoint")
		assert.Contains(t, d.Adopt, bobRef)
		assert.Empty(t, d.Waiting)
	}
}

// When kfam's binding goes, the plugin's policy is emptied at once (it admits no one from this
// call on) and left for kfam's DELETE, which must find it, until the grace period since it was
// emptied has passed; then the plugin wants it no more and the runner deletes it.
func TestRemovedContributorsPolicyIsEmptiedAndLeftForKfam(t *testing.T) {
	for _, mode := range []string{"ambient", "sidecar"} {
		p := kfamPlugin(t, mode, "10s", t0.Add(1500*time.Millisecond))
		d := generateFor(t, p, pluginsPolicy(t, p))
		pol := contributorObject(d)
		require.NotNil(t, pol, mode)
		assert.Empty(t, pol.Spec.Rules, "%s: an ALLOW policy without rules matches nothing", mode)
		assert.Equal(t, "2026-12-01T14:00:01Z", pol.Annotations[WithdrawnAnnotation], mode)
		assert.Equal(t, kfamUser, pol.Annotations[UserAnnotation], mode)
		assert.Equal(t, mode == "ambient", len(pol.Spec.TargetRefs) == 1, "%s: attached where it was", mode)
		require.Len(t, d.Waiting, 1, mode)
		assert.Contains(t, d.Waiting[0], "left for kfam to delete until 2026-12-01T14:00:11Z", mode)

		// The next calls keep the mark, so the same body is wanted and nothing is rewritten.
		pol.Labels, pol.ManagedFields = pluginsPolicy(t, p).Labels, pluginsPolicy(t, p).ManagedFields
		p.now = func() time.Time { return t0.Add(10 * time.Second) }
		again := contributorObject(generateFor(t, p, pol))
		require.NotNil(t, again, mode)
		assert.Equal(t, pol.Annotations, again.Annotations, mode)

		p.now = func() time.Time { return t0.Add(11 * time.Second) }
		d = generateFor(t, p, pol)
		assert.Nil(t, contributorObject(d), "%s: the grace period is over: pruned", mode)
		assert.Empty(t, d.Waiting, mode)
	}
}

// A binding that comes back while its policy is emptied gets the full policy again at once.
func TestReaddedContributorGetsItsRuleBack(t *testing.T) {
	p := kfamPlugin(t, "ambient", "10s", t0.Add(2*time.Second))
	emptied := p.policies.withdrawnPolicy(pluginsPolicy(t, p), t0)
	emptied.Labels = pluginsPolicy(t, p).Labels
	d := generateFor(t, p, bindingAt(t0.Add(time.Second)), emptied)
	pol := contributorObject(d)
	require.NotNil(t, pol)
	assert.Equal(t, []string{kfamUser}, pol.Spec.Rules[0].When[0].Values)
	assert.NotContains(t, pol.Annotations, WithdrawnAnnotation)
	assert.Empty(t, d.Waiting)
}

// Another writer's contributor policy without a binding is not the plugin's to empty or keep,
// nor are the owner and ztunnel policies, which carry the plugin's labels too.
func TestOnlyOwnContributorPoliciesAreEmptied(t *testing.T) {
	p := kfamPlugin(t, "ambient", "10s", t0)
	owner := pluginsPolicy(t, p)
	owner.Name, owner.Annotations = p.cfg.Authorization.OwnerPolicyName, map[string]string{RoleAnnotation: RoleAdmin, UserAnnotation: "owner@example.com"}
	d := generateFor(t, p, kfamsPolicy(), owner)
	assert.Nil(t, contributorObject(d))
	assert.Empty(t, d.Waiting)
}

// kfamGracePeriod 0s is the behaviour without waits: created with the binding, deleted with it.
func TestNoGracePeriodNoWaits(t *testing.T) {
	p := kfamPlugin(t, "ambient", "0s", t0)
	assert.NotNil(t, contributorObject(generateFor(t, p, bindingAt(t0))), "created at once")
	d := generateFor(t, p, pluginsPolicy(t, p))
	assert.Nil(t, contributorObject(d), "pruned at once")
	assert.Empty(t, d.Waiting)
}

// The emptied policy uses no attribute ztunnel would drop and admits nothing: no rules at all.
func TestWithdrawnPolicyHasNoRules(t *testing.T) {
	p := kfamPlugin(t, "ambient", "10s", t0)
	pol := p.policies.withdrawnPolicy(pluginsPolicy(t, p), t0)
	assert.Empty(t, L7Attributes(&pol.Spec))
	assert.Nil(t, pol.Spec.Rules)
	assert.Nil(t, pol.Spec.Selector)
	assert.Equal(t, "ALLOW", pol.Spec.Action.String())
}

// A policy only the plugin ever wrote (kfam never POSTed it, or the plugin's apply made it again
// after kfam's DELETE) goes with its binding: no DELETE of kfam's is coming, and kfam's next POST
// for the contributor must not find it.
func TestPolicyOnlyThePluginWroteGoesWithItsBinding(t *testing.T) {
	p := kfamPlugin(t, "ambient", "10s", t0)
	d := generateFor(t, p, onlyPluginsPolicy(t, p))
	assert.Nil(t, contributorObject(d))
	assert.Empty(t, d.Waiting)
	emptied := p.policies.withdrawnPolicy(onlyPluginsPolicy(t, p), t0)
	emptied.Labels, emptied.ManagedFields = onlyPluginsPolicy(t, p).Labels, onlyPluginsPolicy(t, p).ManagedFields
	assert.Nil(t, contributorObject(generateFor(t, p, emptied)), "an emptied policy made again by the plugin's own apply")
}

// Without kfamGracePeriod in the file the waits last ten seconds.
func TestDefaultGracePeriodIsTenSeconds(t *testing.T) {
	assert.Equal(t, 10*time.Second, New(fixture.Config(t, "authorization: {contributors: plugin}\n")).grace())
}
