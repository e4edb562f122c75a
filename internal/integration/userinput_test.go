package integration

// Regression tests, on the real API server, for the attack review of Dec 1 (SECURITY.md,
// "Attack review of Dec 1").

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Finding 1. The API server labels every namespace kubernetes.io/metadata.name=<its name>, and a
// Profile's namespace has the Profile's name, so an override selecting on that label would go to
// whoever registers the name first. The configuration that would do so is refused, naming the key.
func TestAnOverrideOnTheNameLabelTheAPIServerSetsIsRefused(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	p := profileIn(t, env.Client, "dec1-team-gpu")
	assert.Equal(t, p.Name, namespaceLabels(t, env.Client, p.Name)["kubernetes.io/metadata.name"],
		"the API server derives the label from the name the user picked")

	_, err := config.Parse([]byte("apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\n" +
		"podSecurity: {overrides: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: " + p.Name + "}}, minimumEnforce: privileged}]}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "podSecurity.overrides[0].namespaceSelector.matchLabels[kubernetes.io/metadata.name]")
}

// Finding 2. Namespace-wide ALLOW policies that admit every caller without the shape "rules: [{}]"
// are accepted by the real CRD schema (CEL rules included) and named by the runner's warnings;
// one that keeps an address range out is not.
func TestForeignPoliciesThatAdmitEveryCallerAreNamedOnTheAPIServer(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "dec1-foreign-allow")
	for name, spec := range map[string]string{
		"every-address":   "{rules: [{from: [{source: {ipBlocks: [0.0.0.0/0, '::/0']}}]}]}",
		"no-such-ns":      "{rules: [{from: [{source: {notNamespaces: [no-such-ns]}}]}]}",
		"every-ipv4":      "{rules: [{when: [{key: source.ip, values: [0.0.0.0/0]}]}]}",
		"all-but-pod-net": "{rules: [{from: [{source: {notIpBlocks: [10.0.0.0/8]}}]}]}",
	} {
		pol := &istiosecurityv1.AuthorizationPolicy{}
		require.NoError(t, yaml.UnmarshalStrict([]byte("metadata: {name: "+name+", namespace: "+p.Name+"}\nspec: "+spec), pol))
		require.NoError(t, c.Create(ctx, pol), "the API server accepts %s", name)
	}
	res := runnerFor(t, c, config.ModeAmbient).Apply(ctx, p)
	require.NoError(t, res.Err())
	all := strings.Join(res.Warnings(), "\n")
	for name, who := range map[string]string{"every-address": "every caller", "no-such-ns": "every caller it does not name", "every-ipv4": "every caller over IPv4"} {
		assert.Contains(t, all, "AuthorizationPolicy "+name+" (not made by this plugin) admits "+who+" at ztunnel", name)
	}
	assert.NotContains(t, all, "all-but-pod-net", "a policy that keeps addresses out is not reported")
}

// Finding 3. With istio.io/use-waypoint-namespace naming another namespace, Istio would send the
// namespace's traffic to a waypoint there that refuses it, and every user would be locked out
// while the Profile said all was applied. The runner reports it as an input error (condition
// False, not retried), withholds the routing labels though the waypoint is Programmed, and routes
// once the label is gone.
func TestAWaypointNamespaceLabelNamingAnotherNamespaceIsReportedOnTheAPIServer(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "dec1-waypoint-elsewhere")
	fixture.Label(t, c, p.Name, map[string]*string{"istio.io/use-waypoint-namespace": ptr.To("kubeflow")})
	r := runnerFor(t, c, config.ModeAmbient)

	var res *runner.Result
	for range 3 {
		res = r.Apply(ctx, p)
		programWaypoint(t, c, p.Name)
	}
	gw := &gatewayv1.Gateway{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: "waypoint"}, gw), "the waypoint is made")
	require.NotEmpty(t, gw.Status.Addresses, "and Programmed, so only the label withholds routing")
	require.Error(t, res.Err())
	assert.ErrorIs(t, res.Err(), plugin.ErrInput)
	assert.False(t, res.Retryable(), "only a change of the label mends it")
	assert.Contains(t, res.Err().Error(), `istio.io/use-waypoint-namespace="kubeflow" names another namespace than `+p.Name)
	final := r.Apply(ctx, p)
	assert.Equal(t, "False", kubeflow.Condition(final).Status)
	_, err := kubeflow.Outcome(final)
	assert.True(t, errors.Is(err, reconcile.TerminalError(nil)), "the controller does not retry: %v", err)
	labels := namespaceLabels(t, c, p.Name)
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the namespace stays enrolled and closed")
	assert.NotContains(t, labels, "istio.io/use-waypoint")
	assert.NotContains(t, labels, "istio.io/ingress-use-waypoint")

	fixture.Label(t, c, p.Name, map[string]*string{"istio.io/use-waypoint-namespace": nil})
	for range 3 {
		require.NoError(t, r.Apply(ctx, p).Err())
		programWaypoint(t, c, p.Name)
	}
	assert.Equal(t, "waypoint", namespaceLabels(t, c, p.Name)["istio.io/use-waypoint"], "routed once the label is gone")
}

// programWaypoint plays istiod: the namespace's waypoint, if it exists, is Programmed for its
// generation with an address.
func programWaypoint(t *testing.T, c client.Client, ns string) {
	t.Helper()
	gw := &gatewayv1.Gateway{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "waypoint"}, gw); apierrors.IsNotFound(err) {
		return
	} else {
		require.NoError(t, err)
	}
	gw.Status.Conditions = []metav1.Condition{{Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue,
		Reason: "Programmed", ObservedGeneration: gw.Generation, LastTransitionTime: metav1.Now()}}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: "10.96.10.10"}}
	require.NoError(t, c.Status().Update(context.Background(), gw, client.FieldOwner("istiod")))
}

// Finding 4. The API server accepts a Profile named "team.a" or with 64 characters (a
// cluster-scoped name is a DNS-1123 subdomain) but no namespace of that name. The runner refuses
// such a Profile before any read, with a NamespaceError naming metadata.name and why (profilev1.Validate): a False
// condition and a terminal outcome, instead of retries with backoff and no word; Revoke succeeds,
// so the finalizer does not hold the Profile's deletion.
func TestAProfileWhoseNameCannotNameANamespaceIsRefusedOnTheAPIServer(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	r := runnerFor(t, c, config.ModeAmbient)
	for _, name := range []string{"dec1.team-a", "dec1-" + strings.Repeat("a", 59)} {
		p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: profilev1.ProfileSpec{Owner: fixture.User("alice@example.com")}}
		require.NoError(t, c.Create(ctx, p), "the API server accepts the Profile %q", name)
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		require.True(t, apierrors.IsInvalid(err), "and refuses its namespace: %v", err)

		gets := env.Requests.Get(http.MethodGet)
		res := r.Apply(ctx, p)
		assert.Equal(t, gets, env.Requests.Get(http.MethodGet), "refused before any read")
		var nsErr *ownership.NamespaceError
		require.ErrorAs(t, res.Err(), &nsErr, name)
		assert.Contains(t, nsErr.Rule, "metadata.name: Invalid value")
		assert.False(t, res.Retryable(), "an input error, not retried")
		assert.Equal(t, "False", kubeflow.Condition(res).Status)
		assert.Contains(t, kubeflow.Condition(res).Message, "must be a DNS-1123 label")
		_, outcome := kubeflow.Outcome(res)
		assert.True(t, errors.Is(outcome, reconcile.TerminalError(nil)), "terminal: %v", outcome)

		revoked := r.Revoke(ctx, p)
		require.NoError(t, revoked.Err(), "Revoke lets the finalizer go")
		assert.Contains(t, strings.Join(revoked.Warnings(), "\n"), "nothing revoked there")
	}
}
