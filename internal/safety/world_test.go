package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// The names below are the library's documented contract (README, kubeflow.md, istio-ambient.md),
// written out again here on purpose: the evaluator must not import what it checks.
const (
	userNS     = "alice"
	otherNS    = "bob" // another tenant: the runner of alice's Profile must never touch it
	profileUID = "6a1c0f6e-0000-4000-8000-000000000001"

	waypointName  = "waypoint"
	ownerPolicy   = "ns-owner-access-istio"
	ztunnelPolicy = "ns-owner-access-istio-ztunnel"
	seccompCM     = "waypoint-seccomp"

	labelDataplane   = "istio.io/dataplane-mode"
	labelUseWaypoint = "istio.io/use-waypoint"
	labelIngress     = "istio.io/ingress-use-waypoint"
	labelInjection   = "istio-injection"
	labelRev         = "istio.io/rev"
	labelEnforce     = "pod-security.kubernetes.io/enforce"
	psaPrefix        = "pod-security.kubernetes.io/"
	labelManagedBy   = "app.kubernetes.io/managed-by"
	labelPlugin      = "profile-plugins.kubeflow-ambient.io/plugin"
	managedByValue   = "profile-plugins"
	runnerManagers   = "profile-plugins/" // every per-plugin field manager of the runner starts with it
	labelManager     = "profile-plugins"  // the runner's one field manager of namespace labels
	sidecarName      = "istio-proxy"

	// Foreign writers, each with its own field manager.
	gitops            = "gitops"
	kubectlLabel      = "kubectl-label"
	kubectlEdit       = "kubectl-edit"
	istiod            = "pilot-discovery"
	profileController = "kubeflow-profile-controller"
)

// Pod Security levels, ordered from loosest to strictest.
const (
	privileged = iota
	baseline
	restricted
)

var levelNames = []string{"privileged", "baseline", "restricted"}

// parseLevel reads a level as the API server does for enforce: an unknown value is restricted.
func parseLevel(v string) int {
	if i := slices.Index(levelNames, v); i >= 0 {
		return i
	}
	return restricted
}

type faultKind string

const (
	faultServer   faultKind = "500 before storing"
	faultConflict faultKind = "409 conflict"
	// faultLostReply stores the write and then loses the response, as a timeout does.
	faultLostReply faultKind = "timeout after storing"
)

// cfgModel is the admin's configuration as the test varies it.
type cfgModel struct {
	mode     config.MeshMode
	enforce  int
	hold     bool
	adopt    bool
	override bool // podSecurity.overrides lets alice choose down to privileged
	// wired reads as cmd/profile-plugins-controller does: ConfigMaps through a cache of the plugins'
	// own only, trimmed to their metadata, past it through an API reader for hidden wanted names,
	// for the wanted ones in full and for pods when a decision needs them.
	wired bool
	// onDemand is mesh.waypoint.provision onDemand with idleAfter 30m.
	onDemand bool
}

func (m cfgModel) String() string {
	return fmt.Sprintf("mode=%s enforce=%s preflight=%s adoptOwnerPolicy=%t override=%t wired=%t onDemand=%t",
		m.mode, levelNames[m.enforce], map[bool]string{true: "hold", false: "apply"}[m.hold], m.adopt, m.override, m.wired, m.onDemand)
}

func (m cfgModel) build() (*config.Config, error) {
	c := config.Default()
	c.Mesh.Mode = m.mode
	// The model covers the per-namespace seccomp ConfigMap (its drift, deletion and foreign
	// copies), so it runs with that opt-in on.
	c.Mesh.Waypoint.SeccompPatch = ptr.To(true)
	c.PodSecurity.Enforce.Level = psaLevel(m.enforce)
	c.PodSecurity.Preflight = config.PreflightApply
	if m.hold {
		c.PodSecurity.Preflight = config.PreflightHold
	}
	c.Authorization.AdoptOwnerPolicy = m.adopt
	if m.onDemand {
		c.Mesh.Waypoint.Provision = config.ProvisionOnDemand
		c.Mesh.Waypoint.IdleAfter = &metav1.Duration{Duration: idleAfter}
	}
	if m.override {
		// The admin's label on the namespace selects it ("team: ml", set in newWorld); a Profile's
		// name is user input and may not select an override.
		c.PodSecurity.Overrides = []config.PodSecurityOverride{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}},
			MinimumEnforce:    psaLevel(privileged),
		}}
	}
	return c, c.Validate()
}

// world is the fake API server, the actors around it and the checker's bookkeeping.
type world struct {
	t   testLog
	ctx context.Context
	// store is the API server as foreign writers, istiod and the kubelet reach it: never faulty.
	store client.WithWatch
	// runnerClient is what the runner gets: injected faults, and a check after every write.
	runnerClient client.Client

	cfg       cfgModel
	owner     string
	psRequest string // the Profile's spec.plugins PodSecurity enforce, "" for no entry
	revoked   bool

	faults       []faultKind
	readFaults   int
	inRunner     string   // "reconcile" or "revoke" while the runner runs
	fired        int      // faults fired during the current runner call
	writes       []string // writes the runner sent during the current call
	gitopsLabels map[string]string
	podSeq       int
	// sanctioned is the enforce level found legitimate after the last fault-free reconcile
	// (or the namespace's level before the runner first ran): what preflight hold may keep.
	sanctioned string

	lastSnap *snapshot // the state after the runner's last write in this call

	// clock is the runner's clock (Runner.Now): provision onDemand's idle window moves with it.
	clock time.Time

	violations []string
	skip       map[string]bool
}

// testLog is what the world needs of *rapid.T (the state machine) and *testing.T (scenarios).
type testLog interface {
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
}

func newWorld(t testLog, cfg cfgModel, initialEnforce string, skip map[string]bool) *world {
	w := &world{t: t, ctx: context.Background(), cfg: cfg, owner: validOwners[0], gitopsLabels: map[string]string{}, skip: skip,
		clock: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	profileControlled := []metav1.OwnerReference{{
		APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: userNS, UID: profileUID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	nsLabels := map[string]string{"team": "ml", "app.kubernetes.io/part-of": "kubeflow-profile"}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: userNS, Labels: nsLabels, OwnerReferences: profileControlled,
			Annotations: map[string]string{"owner": validOwners[0]}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS, Labels: map[string]string{labelDataplane: "ambient"}}},
		&istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ztunnelPolicy, Namespace: otherNS,
			Labels: map[string]string{labelManagedBy: managedByValue, labelPlugin: "authz"}}},
	}
	w.store = fake.NewClientBuilder().WithScheme(scheme).WithReturnManagedFields().
		WithStatusSubresource(&gatewayv1.Gateway{}, &istiosecurityv1.AuthorizationPolicy{}).Build()
	// Created as the profiles controller creates them, so managedFields name who set each label
	// (objects given to WithObjects have no managedFields, which no API server would produce).
	for _, o := range objs {
		w.must(w.store.Create(w.ctx, o, client.FieldOwner(profileController)))
	}
	if initialEnforce != "" {
		// What the kubeflow-pss overlay leaves on a namespace before this library runs.
		w.must(w.store.Patch(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: userNS}},
			client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, labelEnforce, initialEnforce)),
			client.FieldOwner(profileController)))
	}
	w.sanctioned = initialEnforce
	w.runnerClient = interceptor.NewClient(w.store, w.interceptors())
	return w
}

// scheme is built once: it is only read, and building it for every sequence is slow.
var scheme = runner.NewScheme()

func (w *world) must(err error) {
	if err != nil {
		w.t.Fatalf("test setup: %v", err)
	}
}

func psaLevel(l int) psaapi.Level { return psaapi.Level(levelNames[l]) }

// profile is the Profile the controller would pass: read from the API server, so it has a UID.
func (w *world) profile() *profilev1.Profile {
	p := &profilev1.Profile{
		TypeMeta:   metav1.TypeMeta{APIVersion: "kubeflow.org/v1", Kind: "Profile"},
		ObjectMeta: metav1.ObjectMeta{Name: userNS, UID: profileUID},
		Spec:       profilev1.ProfileSpec{Owner: rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: w.owner}},
	}
	if w.psRequest != "" {
		p.Spec.Plugins = []profilev1.Plugin{{
			TypeMeta: metav1.TypeMeta{Kind: "PodSecurity"},
			Spec:     &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"enforce":%q}`, w.psRequest)},
		}}
	}
	return p
}

func (w *world) runner() *runner.Runner {
	cfg, err := w.cfg.build()
	w.must(err)
	plugins, err := profileplugins.New(cfg)
	w.must(err)
	r, err := runner.NewRunner(w.runnerClient, plugins...)
	w.must(err)
	r.Now = func() time.Time { return w.clock }
	if w.cfg.wired {
		// profileplugins.CacheOptions and WithManager, without a manager: the same reads.
		r.Reader = managedConfigMapsOnly{w.runnerClient}
		r.APIReader = w.runnerClient
		r.FullyCached = []schema.GroupKind{
			{Group: istiosecurityv1.GroupName, Kind: "AuthorizationPolicy"},
			{Group: gatewayv1.GroupName, Kind: "Gateway"},
			{Group: rbacv1.GroupName, Kind: "RoleBinding"},
		}
		r.Trimmed = []schema.GroupKind{{Kind: "ConfigMap"}}
	}
	return r
}

// managedConfigMapsOnly shows ConfigMaps only when they carry the plugins' label, and of those only
// what the cache transform keeps, as a cache with profileplugins.CacheByObject does.
type managedConfigMapsOnly struct{ client.Reader }

func (m managedConfigMapsOnly) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := m.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		if !plugin.ManagedSelector().Matches(labels.Set(obj.GetLabels())) {
			return apierrors.NewNotFound(corev1.Resource("configmaps"), key.Name)
		}
		*cm = *trimmed(cm)
	}
	return nil
}

func (m managedConfigMapsOnly) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := m.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if slices, ok := list.(*discoveryv1.EndpointSliceList); ok {
		// As the cache holds them: trimmed by runner.TrimEndpointSlice.
		for i := range slices.Items {
			out, err := runner.TrimEndpointSlice(slices.Items[i].DeepCopy())
			if err != nil {
				return err
			}
			slices.Items[i] = *out.(*discoveryv1.EndpointSlice)
		}
	}
	if cms, ok := list.(*corev1.ConfigMapList); ok {
		cms.Items = slices.DeleteFunc(cms.Items, func(cm corev1.ConfigMap) bool {
			return !plugin.ManagedSelector().Matches(labels.Set(cm.Labels))
		})
		for i := range cms.Items {
			cms.Items[i] = *trimmed(&cms.Items[i])
		}
	}
	return nil
}

// trimmed is cm as profileplugins.CacheByObject's transform keeps it in the cache.
func trimmed(cm *corev1.ConfigMap) *corev1.ConfigMap {
	out, err := plugin.TrimConfigMap(cm.DeepCopy())
	if err != nil {
		panic(err)
	}
	return out.(*corev1.ConfigMap)
}

// reconcile runs Runner.Apply as the profiles controller does and checks the outcome.
func (w *world) reconcile() *runner.Result {
	return w.runnerCall("reconcile", func(r *runner.Runner) *runner.Result { return r.Apply(w.ctx, w.profile()) })
}

func (w *world) revoke() *runner.Result {
	return w.runnerCall("revoke", func(r *runner.Runner) *runner.Result { return r.Revoke(w.ctx, w.profile()) })
}

func (w *world) runnerCall(what string, call func(*runner.Runner) *runner.Result) *runner.Result {
	r := w.runner()
	// Only the runner acts during its call, so one write's "after" is the next one's "before".
	w.inRunner, w.fired, w.writes, w.lastSnap = what, 0, nil, nil
	res := call(r)
	w.inRunner, w.lastSnap = "", nil
	w.t.Logf("  %s (%s, owner %q, profile enforce %q): %d write(s), %d fault(s) fired; %s", what, w.cfg, w.owner, w.psRequest,
		len(w.writes), w.fired, res)
	if err := res.Err(); err != nil {
		w.t.Logf("    errors: %v", err)
	}
	for _, s := range res.Waiting() {
		w.t.Logf("    waiting: %s", s)
	}
	w.countReached(w.snap())
	if what == "reconcile" && w.fired > 0 {
		w.sanctionWritten(w.snap())
	}
	if w.fired == 0 {
		if what == "revoke" {
			w.checkRevoked(res, w.snap())
		} else {
			w.checkReconciled(res, w.snap())
		}
	}
	return res
}

// interceptors inject the armed faults into the runner's calls and check every write it makes.
func (w *world) interceptors() interceptor.Funcs {
	read := func() error {
		if w.inRunner != "" && w.readFaults > 0 {
			w.readFaults--
			w.fired++
			return apierrors.NewServiceUnavailable("injected read fault")
		}
		return nil
	}
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := read(); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := read(); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return w.write("create "+describe(c, obj), func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return w.write("update "+describe(c, obj), func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return w.write("patch "+describe(c, obj), func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return w.write("delete "+describe(c, obj), func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return w.write("deleteAllOf "+describe(c, obj), func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return w.write("apply "+describeApply(obj), func() error { return c.Apply(ctx, obj, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return w.write("create "+sub+" of "+describe(c, obj), func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return w.write("update "+sub+" of "+describe(c, obj), func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return w.write("patch "+sub+" of "+describe(c, obj), func() error { return c.SubResource(sub).Patch(ctx, obj, p, opts...) })
		},
	}
}

// write sends one runner write through the armed faults and checks the state it leaves.
func (w *world) write(what string, send func() error) error {
	w.writes = append(w.writes, what)
	var fault faultKind
	if len(w.faults) > 0 {
		fault, w.faults = w.faults[0], w.faults[1:]
		w.fired++
	}
	switch fault {
	case faultServer:
		w.t.Logf("    runner %s: injected %s", what, fault)
		return apierrors.NewInternalError(fmt.Errorf("injected fault"))
	case faultConflict:
		w.t.Logf("    runner %s: injected %s", what, fault)
		return apierrors.NewConflict(schema.GroupResource{}, "", fmt.Errorf("injected conflict"))
	}
	before := w.lastSnap
	if before == nil {
		b := w.snap()
		before = &b
	}
	err := send()
	w.lastSnap = nil
	if err == nil {
		w.countGenerations(*before)
		after := w.snap()
		w.checkWrite(what, *before, after)
		w.lastSnap = &after
	}
	if fault == faultLostReply {
		w.t.Logf("    runner %s: stored (err %v), then injected %s", what, err, fault)
		return apierrors.NewTimeoutError("injected: the response was lost", 1)
	}
	w.t.Logf("    runner %s: %v", what, errOrOK(err))
	return err
}

// countGenerations does what the fake client does not (see its package doc): a Gateway's
// metadata.generation starts at 1 and counts its spec changes, so istiod's Programmed condition
// for an older generation is stale, as on a real API server.
func (w *world) countGenerations(before snapshot) {
	gws := &gatewayv1.GatewayList{}
	w.must(w.store.List(w.ctx, gws, client.InNamespace(userNS)))
	for i := range gws.Items {
		g := &gws.Items[i]
		prev := before.gateways[g.Name]
		switch {
		case prev == nil || prev.UID != g.UID:
			if g.Generation != 0 {
				continue
			}
			g.Generation = 1
		case !reflect.DeepEqual(prev.Spec, g.Spec) && g.Generation == prev.Generation:
			g.Generation = prev.Generation + 1
		default:
			continue
		}
		w.must(w.store.Update(w.ctx, g))
	}
}

func errOrOK(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

func describe(c client.Client, obj client.Object) string {
	gvk, _ := c.GroupVersionKindFor(obj)
	return fmt.Sprintf("%s %s/%s", gvk.Kind, obj.GetNamespace(), obj.GetName())
}

// describeApply names the object of a server-side apply from its JSON form.
func describeApply(obj runtime.ApplyConfiguration) string {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(data, &m)
	if m.Kind == "Namespace" {
		return fmt.Sprintf("Namespace %s labels %s", m.Metadata.Name, formatLabels(m.Metadata.Labels))
	}
	return fmt.Sprintf("%s %s/%s", m.Kind, m.Metadata.Namespace, m.Metadata.Name)
}

func formatLabels(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// violate records a broken invariant; Check reports them after the step.
func (w *world) violate(id, format string, args ...any) {
	if w.skip[id] {
		return
	}
	v := id + ": " + fmt.Sprintf(format, args...)
	if !slices.Contains(w.violations, v) {
		w.violations = append(w.violations, v)
	}
}

// reached counts, over every sequence of a run, the states worth reaching after a runner call, so
// a generator that stops reaching them fails TestRunnerSafety instead of passing vacuously.
var reached = map[string]int{}

func (w *world) countReached(s snapshot) {
	count := func(state string, ok bool) {
		if ok {
			reached[state]++
		}
	}
	bare := false
	for _, p := range s.pods {
		bare = bare || !p.sidecar
	}
	enrolled := s.labels[labelDataplane] == "ambient"
	zt, owner, wp := s.policies[ztunnelPolicy], s.policies[ownerPolicy], s.gateways[waypointName]
	want := w.wantEnforce()
	level, _ := s.enforceLevel()
	count(stateRouted, s.runnerOwns(labelUseWaypoint))
	count(stateBareAmbient, enrolled && bare)
	count(stateSidecarKeepsAmbient, w.cfg.mode == config.ModeSidecar && enrolled && bare && s.runnerOwns(labelDataplane))
	count(stateRevokedWithPods, w.revoked && len(s.pods) > 0)
	count(stateFaultFired, w.fired > 0)
	count(stateForeignName, (zt != nil && !isManaged(zt)) || (owner != nil && !isManaged(owner)) || (wp != nil && !isManaged(wp)))
	count(stateImpostor, s.impostors() > 0)
	count(stateHeld, w.cfg.hold && level < want && len(w.violatingPods(s, want)) > 0)
	count(stateIdle, w.cfg.onDemand && w.cfg.mode == config.ModeAmbient && enrolled && wp == nil && s.labels[labelIdleSince] != "")
}

const (
	stateRouted              = "the runner routes through a Programmed waypoint"
	stateBareAmbient         = "a pod without a sidecar runs in an enrolled namespace"
	stateSidecarKeepsAmbient = "sidecar mode keeps ambient enrolment for a pod without a sidecar"
	stateRevokedWithPods     = "revoked while pods run"
	stateFaultFired          = "an injected fault fired during a runner call"
	stateForeignName         = "a foreign object holds a managed name"
	stateImpostor            = "an editor's object carries the runner's labels without the Profile as controller"
	stateHeld                = "preflight hold keeps a looser level while pods violate the wanted one"
	stateIdle                = "an idle namespace (provision onDemand) is enrolled with no waypoint"
)

// idleAfter is the model's mesh.waypoint.idleAfter; labelIdleSince the label that records the
// start of the idle window.
const (
	idleAfter      = 30 * time.Minute
	labelIdleSince = "profile-plugins.kubeflow-ambient.io/waypoint-idle-since"
)
