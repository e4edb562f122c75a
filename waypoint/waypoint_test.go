package waypoint_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

const ns = "kubeflow-user-example-com"

func programmed(cfg *config.Config) *gatewayv1.Gateway { return fixture.ProgrammedGateway(cfg, ns) }

func render(t *testing.T, cfg *config.Config, observed ...client.Object) *runner.Rendering {
	t.Helper()
	target := plugin.Target{Namespace: ns, Owner: "user@example.com", Observed: plugin.Observed{Objects: observed}}
	r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{waypoint.New(cfg)}, target)
	require.NoError(t, err)
	return r
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name, config string
		ready        bool
		// what the golden must show, checked here so a blind -update cannot hide a regression
		wantLabels map[string]string
		noLabels   []string
	}{
		{name: "ambient-default", ready: true,
			wantLabels: map[string]string{"istio.io/dataplane-mode": "ambient", "istio.io/use-waypoint": "waypoint", "istio.io/ingress-use-waypoint": "true", "istio-injection": "disabled"}},
		{name: "ambient-not-programmed", ready: false,
			wantLabels: map[string]string{"istio.io/dataplane-mode": "ambient", "istio-injection": "disabled"},
			noLabels:   []string{"istio.io/use-waypoint", "istio.io/ingress-use-waypoint"}},
		{name: "ambient-custom", ready: true,
			config:     "mesh: {waypoint: {name: l7, className: custom-waypoint, for: all, labels: {team: ml}, annotations: {example.com/note: x}}}\n",
			wantLabels: map[string]string{"istio.io/use-waypoint": "l7", "istio.io/ingress-use-waypoint": "true"}},
		{name: "ambient-revision", ready: true, config: "mesh: {revision: canary}\n",
			wantLabels: map[string]string{"istio.io/rev": "canary", "istio.io/use-waypoint": "waypoint"}},
		{name: "ambient-restricted", ready: true, config: "podSecurity: {enforce: {level: restricted}}\n",
			wantLabels: map[string]string{"istio.io/use-waypoint": "waypoint"}},
		{name: "ambient-seccomp-patch", ready: true, config: "mesh: {waypoint: {seccompPatch: true}}\n",
			wantLabels: map[string]string{"istio.io/use-waypoint": "waypoint"}},
		{name: "sidecar", config: "mesh: {mode: sidecar}\n",
			wantLabels: map[string]string{"istio-injection": "enabled"}, noLabels: []string{"istio.io/dataplane-mode", "istio.io/use-waypoint"}},
		{name: "sidecar-revision", config: "mesh: {mode: sidecar, revision: canary}\n",
			wantLabels: map[string]string{"istio.io/rev": "canary"}, noLabels: []string{"istio-injection"}},
		{name: "none", config: "mesh: {mode: none}\n", noLabels: []string{"istio-injection", "istio.io/dataplane-mode"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fixture.Config(t, tc.config)
			var observed []client.Object
			if tc.ready {
				observed = append(observed, programmed(cfg))
			}
			// The authz plugin is not in this set: render the ztunnel policy as existing, as the
			// full set would, by adding a stand-in plugin.
			target := plugin.Target{Namespace: ns, Owner: "user@example.com", Observed: plugin.Observed{Objects: observed}}
			r, err := runner.Render(runner.NewScheme(), []plugin.Plugin{waypoint.New(cfg), ztunnelStandIn{cfg}}, target)
			require.NoError(t, err)
			labels := r.Namespace.GetLabels()
			for k, v := range tc.wantLabels {
				assert.Equal(t, v, labels[k], "label %s", k)
			}
			for _, k := range tc.noLabels {
				assert.NotContains(t, labels, k)
			}
			if cfg.Mesh.Mode == config.ModeAmbient && !tc.ready {
				require.Len(t, r.Waiting, 1)
				assert.Contains(t, r.Waiting[0], "waiting for waypoint: Gateway kubeflow-user-example-com/waypoint does not exist yet")
			} else {
				assert.Empty(t, r.Waiting)
			}
			// The stand-in's policy is not part of this plugin's golden file.
			r.Objects = r.Objects[:len(r.Objects)-len(standInObjects(cfg))]
			out, err := r.YAML()
			require.NoError(t, err)
			golden.Assert(t, "waypoint/"+tc.name+".yaml", out)
		})
	}
}

// ztunnelStandIn plays the authz plugin's part: the ztunnel and owner policies the enrolment and
// routing labels wait for.
type ztunnelStandIn struct{ cfg *config.Config }

func (ztunnelStandIn) Name() string { return "authz-stand-in" }
func (ztunnelStandIn) Kinds() []client.ObjectList {
	return []client.ObjectList{&istiosecurityv1.AuthorizationPolicyList{}}
}
func (s ztunnelStandIn) Generate(plugin.Target) (plugin.Desired, error) {
	return plugin.Desired{Objects: standInObjects(s.cfg)}, nil
}

func standInObjects(cfg *config.Config) []client.Object {
	if cfg.Mesh.Mode != config.ModeAmbient {
		return nil
	}
	return []client.Object{
		&istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: cfg.Authorization.ZtunnelPolicyName}},
		&istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: cfg.Authorization.OwnerPolicyName}},
	}
}

func TestWithoutTheZtunnelPolicyTheNamespaceIsNotEnrolled(t *testing.T) {
	cfg := config.Default()
	r := render(t, cfg, programmed(cfg))
	labels := r.Namespace.GetLabels()
	assert.NotContains(t, labels, "istio.io/dataplane-mode")
	assert.NotContains(t, labels, "istio.io/use-waypoint")
	assert.Equal(t, "disabled", labels["istio-injection"])
	assert.Contains(t, r.Waiting, "waypoint: label istio.io/dataplane-mode withheld: AuthorizationPolicy.security.istio.io/ns-owner-access-istio-ztunnel does not exist")
}

func TestReady(t *testing.T) {
	cfg := config.Default()
	mutate := func(f func(*gatewayv1.Gateway)) client.Object {
		gw := programmed(cfg)
		f(gw)
		return gw
	}
	cases := []struct {
		name     string
		observed []client.Object
		ready    bool
		why      string
	}{
		{"programmed", []client.Object{programmed(cfg)}, true, ""},
		{"missing", nil, false, "does not exist yet"},
		{"foreign", []client.Object{mutate(func(g *gatewayv1.Gateway) { delete(g.Labels, plugin.PluginLabel) })}, false, "not made by this plugin"},
		{"other class", []client.Object{mutate(func(g *gatewayv1.Gateway) { g.Spec.GatewayClassName = "istio" })}, false, `has class "istio"`},
		{"no condition", []client.Object{mutate(func(g *gatewayv1.Gateway) { g.Status.Conditions = nil })}, false, "no Programmed condition"},
		{"refused", []client.Object{mutate(func(g *gatewayv1.Gateway) {
			g.Status.Conditions[0].Status, g.Status.Conditions[0].Reason = metav1.ConditionFalse, "AddressNotAssigned"
			g.Status.Conditions[0].Message = "pods refused by PodSecurity"
		})}, false, "is not Programmed (AddressNotAssigned: pods refused by PodSecurity)"},
		{"stale generation", []client.Object{mutate(func(g *gatewayv1.Gateway) { g.Generation = 2 })}, false, "generation 1 but its spec is at generation 2"},
		{"no address", []client.Object{mutate(func(g *gatewayv1.Gateway) { g.Status.Addresses = nil })}, false, "no address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ready, why := waypoint.Ready(plugin.Observed{Objects: tc.observed}, waypoint.Gateway(cfg, ns))
			assert.Equal(t, tc.ready, ready)
			assert.Contains(t, why, tc.why)
		})
	}
}

func TestPodsLeftWithASidecarAreListed(t *testing.T) {
	cfg := config.Default()
	pod := func(name string, init bool, containers ...string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, c := range containers {
			if init {
				p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: c})
			} else {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
			}
		}
		return p
	}
	target := plugin.Target{Namespace: ns, Observed: plugin.Observed{Pods: []corev1.Pod{
		pod("notebook-0", false, "notebook", "istio-proxy"),
		pod("native-sidecar", true, "istio-proxy"),
		pod("clean", false, "notebook"),
	}}}
	d, err := waypoint.New(cfg).Generate(target)
	require.NoError(t, err)
	require.Len(t, d.Warnings, 1)
	assert.Contains(t, d.Warnings[0], "2 pod(s) still run an istio-proxy sidecar")
	assert.Contains(t, d.Warnings[0], "native-sidecar, notebook-0")
	assert.NotContains(t, d.Warnings[0], "clean")
	assert.True(t, waypoint.New(cfg).NeedsPods())
	assert.False(t, waypoint.New(fixture.Config(t, "mesh: {mode: sidecar}\n")).NeedsPods())
}

// istiod's waypoint runs Istio's proxy in a container named istio-proxy too; it is no sidecar,
// and a warning to restart the namespace's Deployments would only send the user after it.
func TestWaypointPodsAreNotReportedAsSidecarPods(t *testing.T) {
	cfg := config.Default()
	notebook := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "notebook-0"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "notebook"}, {Name: waypoint.SidecarContainer}}}}
	pods := []corev1.Pod{*fixture.WaypointPod(cfg, ns, "waypoint-5d9f7c-x2k"), notebook}
	d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Pods: pods}})
	require.NoError(t, err)
	require.Len(t, d.Warnings, 1)
	assert.Contains(t, d.Warnings[0], "1 pod(s) still run an istio-proxy sidecar")
	assert.NotContains(t, d.Warnings[0], "waypoint-5d9f7c-x2k")

	d, err = waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Pods: pods[:1]}})
	require.NoError(t, err)
	assert.Empty(t, d.Warnings, "the waypoint's own pod alone")
}

// A pod is taken for the waypoint's only with all of istiod's marks: a gateway-name label of
// another Gateway, no gateway.istio.io/managed, or another service account leaves it a sidecar pod.
func TestOnlyTheWaypointsOwnPodsAreExemptFromTheSidecarWarning(t *testing.T) {
	cfg := config.Default()
	for name, change := range map[string]func(*corev1.Pod){
		"other gateway":           func(p *corev1.Pod) { p.Labels["gateway.networking.k8s.io/gateway-name"] = "ingress" },
		"not managed by istiod":   func(p *corev1.Pod) { delete(p.Labels, "gateway.istio.io/managed") },
		"other service account":   func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default-editor" },
		"no gateway-name label":   func(p *corev1.Pod) { delete(p.Labels, "gateway.networking.k8s.io/gateway-name") },
		"renamed waypoint config": func(p *corev1.Pod) { p.Labels["gateway.networking.k8s.io/gateway-name"] = "waypoint-old" },
	} {
		t.Run(name, func(t *testing.T) {
			pod := fixture.WaypointPod(cfg, ns, "lookalike")
			change(pod)
			d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Pods: []corev1.Pod{*pod}}})
			require.NoError(t, err)
			assert.Regexp(t, `1 pod\(s\) still run an istio-proxy sidecar [^\n]*: lookalike`, strings.Join(d.Warnings, "\n"))
		})
	}
}

// The sidecar-form owner policy is what protects a pod that runs a sidecar; it stays while such a
// pod runs, also one that carries the waypoint's labels and service account, which a namespace
// editor can give any pod of theirs: the exemption of the warning does not reach this decision.
func TestPodsLabelledAsTheWaypointStillKeepTheSidecarOwnerPolicy(t *testing.T) {
	cfg := config.Default()
	owner := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: cfg.Authorization.OwnerPolicyName, Namespace: ns}}
	pod := fixture.WaypointPod(cfg, ns, "looks-like-the-waypoint")
	got := waypoint.New(cfg).ProtectedPods(plugin.Observed{Objects: []client.Object{owner}, Pods: []corev1.Pod{*pod}})
	assert.Equal(t, []string{"looks-like-the-waypoint"}, got[plugin.Ref{GroupKind: istiosecurityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy").GroupKind(), Name: owner.Name}])
}

func TestClusterDefaultDenyGolden(t *testing.T) {
	p, err := waypoint.ClusterDefaultDeny(config.Default())
	require.NoError(t, err)
	assert.Empty(t, p.Spec.Rules, "an ALLOW policy with no rules allows nothing")
	assert.Nil(t, p.Spec.Selector)
	out, err := runner.EncodeYAML(runner.NewScheme(), p)
	require.NoError(t, err)
	golden.Assert(t, "waypoint/cluster-default-deny.yaml", out)
}

// istiod attaches a GatewayClass-targeted policy only for istio-waypoint: with a custom class the
// default-deny would be ignored, so it is refused rather than emitted.
func TestClusterDefaultDenyRefusesCustomClass(t *testing.T) {
	cfg := fixture.Config(t, "mesh: {waypoint: {className: corp-waypoint}}\n")
	p, err := waypoint.ClusterDefaultDeny(cfg)
	require.Error(t, err)
	assert.Nil(t, p)
	assert.Contains(t, err.Error(), `mesh.waypoint.className "corp-waypoint"`)
	golden.Assert(t, "waypoint/cluster-custom-class-error.txt", []byte(err.Error()+"\n"))
}

// A shared waypoint is refused with the reason, rather than emitted in a form that fails open.
func TestSharedWaypointIsRefused(t *testing.T) {
	_, err := config.Parse([]byte("apiVersion: " + config.APIVersion + "\nkind: " + config.Kind + "\nmesh: {waypoint: {namespace: istio-waypoints}}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mesh.waypoint.namespace")
	golden.Assert(t, "waypoint/shared-waypoint-error.txt", []byte(err.Error()+"\n"))
}

// Without a pod that runs a sidecar there is nothing to restart, and no warning says there is.
func TestNoSidecarWarningWithoutSidecarPods(t *testing.T) {
	cfg := config.Default()
	for name, pods := range map[string][]corev1.Pod{
		"no pods":    nil,
		"clean pods": {{ObjectMeta: metav1.ObjectMeta{Name: "clean"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "notebook"}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			d, err := waypoint.New(cfg).Generate(plugin.Target{Namespace: ns, Observed: plugin.Observed{Pods: pods}})
			require.NoError(t, err)
			for _, w := range d.Warnings {
				assert.NotContains(t, w, "sidecar")
			}
		})
	}
}
