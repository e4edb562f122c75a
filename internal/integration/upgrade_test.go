package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// releaseNamespace and releaseProfileUID are the namespace and Profile UID the release state was
// made with: the objects name the namespace in their rules and the Profile in their owner
// references, and the runner compares them with what it wants.
const (
	releaseNamespace  = "upgrade-release"
	releaseProfileUID = "7b3c0a52-1de2-4c1d-9f00-000000000001"
)

// A namespace the release at 1de21d5 set up (per-namespace seccomp ConfigMap, Gateway with
// parametersRef) converges under the new default (class defaults, no per-namespace patch): the
// Gateway loses its parametersRef, then the ConfigMap is pruned, and after every single write on
// the way the namespace is in no fail-open state.
func TestUpgradeFromThePerNamespacePatchConverges(t *testing.T) {
	t.Parallel()
	u := startUpgrade(t, releaseNamespace)
	u.replayRelease()
	before := u.snapshot("release state")
	require.NotNil(t, before.patch, "the release state has the per-namespace ConfigMap")
	require.Equal(t, "waypoint", before.labels["istio.io/use-waypoint"], "the release state is routed")

	u.converge(config.Default())
	end := u.snapshot("converged")
	assert.Nil(t, end.gateway.Spec.Infrastructure, "the Gateway keeps its parametersRef")
	assert.Nil(t, end.patch, "the per-namespace ConfigMap is not pruned")
	assert.Equal(t, "waypoint", end.labels["istio.io/use-waypoint"])
	assert.Equal(t, "true", end.labels["istio.io/ingress-use-waypoint"])
	assert.Equal(t, "ambient", end.labels["istio.io/dataplane-mode"])
	u.assertOrder("Gateway/waypoint", "delete ConfigMap/waypoint-seccomp")
}

// The same upgrade when the Gateway update fails once (a conflict, the API server gone for a
// moment): the ConfigMap the Gateway still references stays until a later call has updated the
// Gateway, so istiod never renders the waypoint from a parametersRef that names a missing ConfigMap.
func TestUpgradeWithAFailedGatewayUpdateKeepsTheReferencedConfigMap(t *testing.T) {
	t.Parallel()
	u := startUpgrade(t, releaseNamespace+"-fault")
	u.replayRelease()
	u.failOnce = "apply Gateway/waypoint"
	u.converge(config.Default())
	end := u.snapshot("converged")
	assert.Nil(t, end.gateway.Spec.Infrastructure)
	assert.Nil(t, end.patch)
	assert.Empty(t, u.failOnce, "the fault was injected")
	u.assertOrder("Gateway/waypoint", "delete ConfigMap/waypoint-seccomp")
}

// The reverse: a namespace on the new default converges when the admin turns the opt-in on, and
// the Gateway references the ConfigMap only once it exists.
func TestTurningThePerNamespacePatchOnConverges(t *testing.T) {
	t.Parallel()
	u := startUpgrade(t, "upgrade-on")
	u.converge(config.Default())
	require.Nil(t, u.snapshot("new default").patch)

	optIn := fixture.Config(t, "mesh: {waypoint: {seccompPatch: true}}\n")
	u.converge(optIn)
	end := u.snapshot("converged")
	require.NotNil(t, end.patch)
	require.NotNil(t, end.gateway.Spec.Infrastructure)
	assert.Equal(t, "waypoint-seccomp", end.gateway.Spec.Infrastructure.ParametersRef.Name)
	assert.Equal(t, "waypoint", end.labels["istio.io/use-waypoint"])
	u.assertOrder("apply ConfigMap/waypoint-seccomp", "Gateway/waypoint")
}

// upgrade is one namespace on the real API server, written through a client that checks the
// namespace for fail-open states after every write.
type upgrade struct {
	t       *testing.T
	ctx     context.Context
	ns      string
	base    client.Client // unchecked: setup and snapshots
	checked client.Client
	writes  []string
	profile *profilev1.Profile
	// failOnce, when set, makes the next write whose description starts with it fail, once.
	failOnce string
	// now, when set, is the runners' clock (provision onDemand's idle window).
	now func() time.Time
	// last is the Result of converge's last call.
	last *plugins.Result
}

func startUpgrade(t *testing.T, ns string) *upgrade {
	env := envtest.Start(t)
	u := &upgrade{t: t, ctx: context.Background(), ns: ns, base: env.Client}
	u.profile = &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: releaseProfileUID},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("user@example.com")}}
	write := func(what string, do func() error) error {
		if u.failOnce != "" && strings.HasPrefix(what, u.failOnce) {
			u.failOnce = ""
			return apierrors.NewServiceUnavailable("injected: " + what)
		}
		err := do()
		if err == nil {
			u.writes = append(u.writes, what)
			u.check(u.snapshot("after " + what))
		}
		return err
	}
	watching, err := client.NewWithWatch(env.Base, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	u.checked = interceptor.NewClient(watching, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return write("apply "+describeApply(obj), func() error { return c.Apply(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return write("update "+kindName(c, obj), func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return write("patch "+kindName(c, obj), func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return write("delete "+kindName(c, obj), func() error { return c.Delete(ctx, obj, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return write("create "+kindName(c, obj), func() error { return c.Create(ctx, obj, opts...) })
		},
	})
	require.NoError(t, u.base.Create(u.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{ownership.OwnerAnnotation: "user@example.com"}}}))
	return u
}

func describeApply(obj runtime.ApplyConfiguration) string {
	if n, ok := obj.(*corev1ac.NamespaceApplyConfiguration); ok {
		return "labels of Namespace/" + ptr.Deref(n.Name, "")
	}
	if u, ok := obj.(interface {
		GetKind() string
		GetName() string
	}); ok {
		return u.GetKind() + "/" + u.GetName()
	}
	return fmt.Sprintf("%T", obj)
}

func kindName(c client.Client, obj client.Object) string {
	gvk, _ := c.GroupVersionKindFor(obj)
	return gvk.Kind + "/" + obj.GetName()
}

// replayRelease writes the release state into the namespace the way the release's runner wrote
// it: each object as a server-side apply by the field manager that applied it, each plugin's
// namespace labels by its manager, and the Gateway's status by istiod.
func (u *upgrade) replayRelease() {
	data, err := os.ReadFile(filepath.Join(golden.ModuleRoot(u.t), "testdata", "upgrade", "release-1de21d5.yaml"))
	require.NoError(u.t, err)
	// Another namespace than the release's: its objects name it in their rules. Their
	// desired-hash annotations then differ from what the runner computes, so it rewrites them
	// once (the same content); only the test in releaseNamespace is a byte-exact replay.
	file := filepath.Join(u.t.TempDir(), "release.yaml")
	require.NoError(u.t, os.WriteFile(file, []byte(strings.ReplaceAll(string(data), releaseNamespace, u.ns)), 0o644))
	objs := readObjects(u.t, file)
	require.NotEmpty(u.t, objs)
	for _, obj := range objs {
		managers := appliedBy(u.t, obj)
		if obj.GetKind() == "Namespace" {
			for manager, fields := range managers {
				labels := map[string]string{}
				for _, key := range ownedLabels(fields) {
					labels[key] = obj.GetLabels()[key]
				}
				require.NoError(u.t, u.base.Apply(u.ctx, corev1ac.Namespace(u.ns).WithLabels(labels), client.FieldOwner(manager), client.ForceOwnership))
			}
			continue
		}
		require.Len(u.t, managers, 1, "%s/%s: one plugin applied each object", obj.GetKind(), obj.GetName())
		body := obj.DeepCopy()
		require.Equal(u.t, u.ns, body.GetNamespace())
		body.SetManagedFields(nil)
		body.SetGeneration(0)
		delete(body.Object, "status")
		for manager := range managers {
			require.NoError(u.t, u.base.Apply(u.ctx, client.ApplyConfigurationFromUnstructured(body), client.FieldOwner(manager), client.ForceOwnership))
		}
	}
	u.program()
}

// appliedBy maps each manager that applied obj (operation Apply) to the fields it owns.
func appliedBy(t *testing.T, obj *unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, e := range obj.GetManagedFields() {
		if e.Operation != metav1.ManagedFieldsOperationApply {
			continue
		}
		var fields map[string]any
		require.NoError(t, json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields))
		out[e.Manager] = fields
	}
	return out
}

func ownedLabels(fields map[string]any) []string {
	md, _ := fields["f:metadata"].(map[string]any)
	labels, _ := md["f:labels"].(map[string]any)
	var keys []string
	for k := range labels {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			keys = append(keys, key)
		}
	}
	return keys
}

// program plays istiod: the waypoint becomes Programmed for its current generation.
func (u *upgrade) program() {
	gw := &gatewayv1.Gateway{}
	if err := u.base.Get(u.ctx, client.ObjectKey{Namespace: u.ns, Name: "waypoint"}, gw); apierrors.IsNotFound(err) {
		return
	} else {
		require.NoError(u.t, err)
	}
	c := meta(gw)
	if c != nil && c.ObservedGeneration == gw.Generation {
		return
	}
	gw.Status.Conditions = []metav1.Condition{{Type: string(gatewayv1.GatewayConditionProgrammed), Status: metav1.ConditionTrue,
		Reason: "Programmed", ObservedGeneration: gw.Generation, LastTransitionTime: metav1.Now()}}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: ptr.To(gatewayv1.IPAddressType), Value: "10.96.10.10"}}
	require.NoError(u.t, u.base.Status().Update(u.ctx, gw, client.FieldOwner("istiod")))
}

func meta(gw *gatewayv1.Gateway) *metav1.Condition {
	for i, c := range gw.Status.Conditions {
		if c.Type == string(gatewayv1.GatewayConditionProgrammed) {
			return &gw.Status.Conditions[i]
		}
	}
	return nil
}

// converge runs the runner for cfg, playing istiod between calls, until a call writes nothing
// and waits for nothing.
func (u *upgrade) converge(cfg *config.Config) {
	r, err := plugins.NewRunner(u.checked, cfg)
	require.NoError(u.t, err)
	r.Now = u.now
	for call := 1; call <= 8; call++ {
		before, faulty := len(u.writes), u.failOnce != ""
		res := r.Apply(u.ctx, u.profile)
		u.last = res
		if faulty && u.failOnce == "" {
			require.ErrorContains(u.t, res.Err(), "injected", "call %d", call)
			u.t.Logf("call %d: fault injected; writes so far: %s", call, strings.Join(u.writes, "; "))
			u.program()
			continue
		}
		require.NoError(u.t, res.Err(), "call %d", call)
		u.program()
		if len(u.writes) == before && len(res.Waiting()) == 0 {
			u.t.Logf("converged after %d calls; writes: %s", call, strings.Join(u.writes, "; "))
			return
		}
	}
	u.t.Fatalf("no convergence after 8 calls; writes: %s", strings.Join(u.writes, "; "))
}

// assertOrder says that the last write containing first came before the last write containing second.
func (u *upgrade) assertOrder(first, second string) {
	last := func(s string) int {
		i := -1
		for k, w := range u.writes {
			if strings.Contains(w, s) {
				i = k
			}
		}
		require.GreaterOrEqual(u.t, i, 0, "no write of %s: %v", s, u.writes)
		return i
	}
	assert.Less(u.t, last(first), last(second), "%s must come before %s: %v", first, second, u.writes)
}

// state is the namespace as the API server holds it.
type state struct {
	when           string
	labels         map[string]string
	owner, ztunnel *istiosecurityv1.AuthorizationPolicy
	gateway        *gatewayv1.Gateway
	patch          *corev1.ConfigMap
}

func (u *upgrade) snapshot(when string) state {
	s := state{when: when}
	n := &corev1.Namespace{}
	require.NoError(u.t, u.base.Get(u.ctx, client.ObjectKey{Name: u.ns}, n))
	s.labels = n.Labels
	get := func(name string, obj client.Object) bool {
		err := u.base.Get(u.ctx, client.ObjectKey{Namespace: u.ns, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return false
		}
		require.NoError(u.t, err)
		return true
	}
	if p := (&istiosecurityv1.AuthorizationPolicy{}); get("ns-owner-access-istio", p) {
		s.owner = p
	}
	if p := (&istiosecurityv1.AuthorizationPolicy{}); get("ns-owner-access-istio-ztunnel", p) {
		s.ztunnel = p
	}
	if g := (&gatewayv1.Gateway{}); get("waypoint", g) {
		s.gateway = g
	}
	if c := (&corev1.ConfigMap{}); get("waypoint-seccomp", c) {
		s.patch = c
	}
	return s
}

// check fails the test on any fail-open state: routing labels without the owner policy attached
// to the waypoint and an intact ztunnel policy, ambient enrolment without the ztunnel policy, or
// a Gateway that references a ConfigMap that is missing or not the plugin's.
func (u *upgrade) check(s state) {
	t := u.t
	t.Helper()
	if s.labels["istio.io/dataplane-mode"] == "ambient" {
		assert.True(t, ztunnelIntact(s.ztunnel, u.ns), "%s: in ambient without the intact ztunnel policy", s.when)
	}
	for _, key := range []string{"istio.io/use-waypoint", "istio.io/ingress-use-waypoint"} {
		if s.labels[key] == "" {
			continue
		}
		assert.True(t, ztunnelIntact(s.ztunnel, u.ns), "%s: %s set without the intact ztunnel policy", s.when, key)
		assert.True(t, s.owner != nil && plugin.IsManagedBy(s.owner.Labels, "authz") && attachedTo(s.owner, "waypoint") && len(s.owner.Spec.Rules) > 0,
			"%s: %s set without the owner policy attached to the waypoint", s.when, key)
		assert.NotNil(t, s.gateway, "%s: %s set without the waypoint", s.when, key)
	}
	if s.gateway != nil && s.gateway.Spec.Infrastructure != nil && s.gateway.Spec.Infrastructure.ParametersRef != nil {
		ref := s.gateway.Spec.Infrastructure.ParametersRef.Name
		assert.True(t, s.patch != nil && s.patch.Name == ref && plugin.IsManagedBy(s.patch.Labels, "waypoint"),
			"%s: the Gateway references ConfigMap %s, which is missing or not the plugin's", s.when, ref)
	}
}

func ztunnelIntact(p *istiosecurityv1.AuthorizationPolicy, ns string) bool {
	if p == nil || !plugin.IsManagedBy(p.Labels, "authz") || p.Annotations["istio.io/dry-run"] == "true" ||
		len(p.Spec.TargetRefs) > 0 || p.Spec.Selector != nil || len(p.Spec.Rules) == 0 {
		return false
	}
	for _, r := range p.Spec.Rules {
		if len(r.From) == 0 { // a rule without a source admits every caller
			return false
		}
	}
	return slices.ContainsFunc(p.Spec.Rules, func(r *securityv1beta1.Rule) bool {
		return slices.Contains(r.From[0].GetSource().GetServiceAccounts(), ns+"/waypoint")
	})
}

func attachedTo(p *istiosecurityv1.AuthorizationPolicy, gw string) bool {
	return slices.ContainsFunc(p.Spec.TargetRefs, func(r *typev1beta1.PolicyTargetReference) bool {
		return r.GetKind() == "Gateway" && r.GetName() == gw
	})
}
