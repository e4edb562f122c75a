package platform_test

// Attack tests of the second security review (internal/safety/FINDINGS-2.md): a platform check that reports
// clean on a broken cluster, and a runner that takes a bad configuration.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// healthyPlatform is a fake API server holding objs and, where objs do not have them already,
// what fixture.Platform makes for cfg (every caller's namespace ambient with one ambient pod, the
// ingress gateway's namespace) and the waypoint class defaults.
func healthyPlatform(t *testing.T, cfg *config.Config, objs ...client.Object) client.Client {
	t.Helper()
	all := append([]client.Object(nil), objs...)
	seen := map[string]bool{}
	for _, o := range objs {
		seen[o.GetNamespace()+"/"+o.GetName()] = true
	}
	add := func(o client.Object) {
		if key := o.GetNamespace() + "/" + o.GetName(); !seen[key] {
			seen[key] = true
			all = append(all, o)
		}
	}
	for _, caller := range cfg.Authorization.PlatformCallers {
		ns, sa := split(caller.Principal)
		add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"istio.io/dataplane-mode": "ambient"}}})
		add(fixture.MeshPod(ns, sa+"-0", sa, fixture.AmbientPod))
	}
	ingressNS, _ := split(cfg.Authorization.Principals.IngressGateway)
	add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ingressNS}})
	defaults, err := waypoint.ClassDefaults(cfg)
	require.NoError(t, err)
	add(defaults)
	return fake.NewClientBuilder().WithScheme(runner.NewScheme()).
		WithIndex(&corev1.Pod{}, "spec.serviceAccountName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.ServiceAccountName}
		}).WithObjects(all...).Build()
}

func split(principal string) (namespace, sa string) {
	parts := strings.Split(principal, "/")
	return parts[2], parts[4]
}

func ingressPod(cfg *config.Config, ip string) *corev1.Pod {
	ns, sa := split(cfg.Authorization.Principals.IngressGateway)
	pod := fixture.MeshPod(ns, "istio-ingressgateway-7f9", sa, nil)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	return pod
}

// The fixture is healthy: the check finds nothing (so the findings below are the attack's).
func TestAttackPlatformFixtureIsClean(t *testing.T) {
	cfg := config.Default()
	report, err := platform.Check(context.Background(), healthyPlatform(t, cfg, ingressPod(cfg, "10.42.7.15")), cfg)
	require.NoError(t, err)
	assert.Empty(t, report.Findings)
}

// FINDING (fail-open left unreported, careless admin). The README's own example exception is
// ipBlocks [10.42.7.0/24]: a per-node pod CIDR (k3s/flannel), so every pod on that node is
// admitted to every user pod past the waypoint, the ingress gateway's too when it is scheduled
// there. The ingress forwards requests for any user; at L4 nobody checks the user-id header, so
// a user who can make it send to a pod address (a ServiceEntry or route in their own namespace)
// reaches any namespace's pods. Validation cannot know addresses; the platform check already lists
// the ingress gateway's pods (and those of every on-behalf-of-user caller), with their IPs, and
// reports nothing. Suggested fix: in Check, report every ipBlocks entry that contains
// a pod IP of the ingress gateway or of a platform caller with onBehalfOfUser.
func TestAttackPlatformCheckMissesAnIPBlockCoveringTheIngressGateway(t *testing.T) {
	cfg := fixture.Config(t, "authorization: {l4Exceptions: [{ipBlocks: [10.42.7.0/24], ports: [9091]}]}\n")
	report, err := platform.Check(context.Background(), healthyPlatform(t, cfg, ingressPod(cfg, "10.42.7.15")), cfg)
	require.NoError(t, err)
	assert.NotEmpty(t, report.Findings, "the ingress gateway's pod 10.42.7.15 is in authorization.l4Exceptions[0].ipBlocks[0] 10.42.7.0/24, and the check is clean")
}

// FINDING (fail-open left unreported, careless admin). A platform caller's principal names a
// namespace that is a user's: a Profile's namespace (owned by it, enrolled by the plugins). The
// reserved-namespace rule then only makes the runner refuse that Profile (Revoke touches
// nothing); its owner keeps the namespace, can run pods as the trusted service account, and
// reaches every other user namespace as that caller (at L4 past the waypoint for a sidecar
// caller). The check reads that namespace and reports nothing. Suggested fix: report a caller
// (or ingress, or L4 exception) namespace that a Profile controls or that carries the plugins'
// labels, as a finding with the fix "move the caller or delete the Profile".
func TestAttackPlatformCheckMissesACallerInAUserNamespace(t *testing.T) {
	cfg := fixture.Config(t, `authorization:
  platformCallers:
  - {name: notebook-controller, principal: cluster.local/ns/kubeflow/sa/notebook-controller-service-account, methods: [GET], paths: ["*/api/kernels"]}
  - {name: batch-scraper, principal: cluster.local/ns/team-a/sa/default, dataPlane: sidecar}
`)
	userNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a",
		Annotations: map[string]string{ownership.OwnerAnnotation: "mallory@example.com"},
		Labels: map[string]string{"istio-injection": "enabled", "pod-security.kubernetes.io/enforce": "baseline",
			"app.kubernetes.io/part-of": "kubeflow-profile"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "team-a", UID: "u-1", Controller: ptr.To(true)}},
	}}
	pod := fixture.MeshPod("team-a", "default-0", "default", fixture.SidecarPod)
	report, err := platform.Check(context.Background(), healthyPlatform(t, cfg, userNS, pod, ingressPod(cfg, "10.42.0.9")), cfg)
	require.NoError(t, err)
	assert.NotEmpty(t, report.Findings, "caller batch-scraper's namespace team-a is Profile team-a's (owner mallory), and the check is clean")
}

// FINDING (cosmetic: the check reports clean on a cluster where namespaces wait forever). The
// waypoint finding is given only when the configured enforce is restricted. A Profile may
// tighten its own enforce to restricted (always allowed), and a GitOps tool's stricter level is
// kept: in each such namespace, without the class defaults, Pod Security refuses the waypoint's
// pods and the namespace waits forever (its waiting message says so), while the platform check,
// the one report an admin reads for the cluster, is clean. Suggested fix: report missing class
// defaults in ambient mode whatever the configured level (as a finding that names the namespaces
// that would need them, or a lower-severity kind).
func TestAttackPlatformCheckCleanWithoutClassDefaultsUnderAProfileChosenRestricted(t *testing.T) {
	cfg := config.Default()
	c := healthyPlatform(t, cfg, ingressPod(cfg, "10.42.0.9"))
	defaults, err := waypoint.ClassDefaults(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Delete(context.Background(), defaults))
	report, err := platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	assert.NotEmpty(t, report.Findings, "no waypoint class defaults in ambient mode: every Profile that tightens enforce to restricted waits forever, and the check is clean")
}

// FINDING (silent-bad-config, Go API). NewRunner takes any *Config: one that Validate refuses
// (here a /0 exception and an on-behalf-of-user caller on sidecars in ambient mode, as a Go
// caller gets by changing a loaded configuration) builds a runner without an error, and its
// plugins render what validation exists to refuse. Suggested fix: NewRunner (and New) call
// cfg.Validate() and return its error.
func TestAttackNewRunnerTakesAnInvalidConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Authorization.L4Exceptions = []config.L4Exception{{IPBlocks: []string{"0.0.0.0/0"}}}
	cfg.Authorization.PlatformCallers[0].DataPlane = config.CallerSidecar
	require.Error(t, cfg.Validate())
	_, err := plugins.NewRunner(fake.NewClientBuilder().WithScheme(runner.NewScheme()).Build(), cfg)
	assert.Error(t, err, "NewRunner accepts a configuration Validate refuses")
}
