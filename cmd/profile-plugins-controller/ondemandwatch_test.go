package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// written is one write of the controller and the namespace as the API server held it right after.
type written struct {
	what       string
	at         time.Time
	routed     bool // istio.io/use-waypoint or istio.io/ingress-use-waypoint set
	gateway    bool // Gateway waypoint exists, not being deleted
	programmed bool // ... and is Programmed at its generation, with an address
	idleSince  string
	condition  string // the Profile's (named like the namespace)
}

// routingCheck is the upgrade tests' check after every write (internal/integration, upgrade.check),
// for a manager: its client records each write of the controller and then reads the namespace
// from the API server, noting any fail-open state: a routing label while the waypoint is missing
// or not Programmed at its generation, or ambient without the plugins' ztunnel policy. Only the
// controller adds or removes routing labels, the Gateway or its generation (the test writes a
// Service, EndpointSlices and the Gateway's status), so the states after its writes are every
// state the namespace goes through.
type routingCheck struct {
	base client.Client
	ns   string

	mu       sync.Mutex
	log      []written
	failOpen []string
}

// newClient is a ctrl.Options.NewClient: the manager's client, every write checked.
func (rc *routingCheck) newClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.NewWithWatch(cfg, opts)
	if err != nil {
		return nil, err
	}
	kind := func(obj client.Object) string {
		gvk, _ := c.GroupVersionKindFor(obj)
		return gvk.Kind + "/" + obj.GetName()
	}
	write := func(what string, do func() error) error {
		err := do()
		if err == nil {
			rc.after(what)
		}
		return err
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			return write("apply "+describeApplied(obj), func() error { return c.Apply(ctx, obj, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return write("create "+kind(obj), func() error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return write("update "+kind(obj), func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return write("patch "+kind(obj), func() error { return c.Patch(ctx, obj, p, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return write("delete "+kind(obj), func() error { return c.Delete(ctx, obj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return write("update "+sub+" of "+kind(obj), func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return write("patch "+sub+" of "+kind(obj), func() error { return c.SubResource(sub).Patch(ctx, obj, p, opts...) })
		},
	}), nil
}

func describeApplied(obj runtime.ApplyConfiguration) string {
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

// after reads the namespace once the write what succeeded, logs it and notes a fail-open state.
func (rc *routingCheck) after(what string) {
	ctx := context.Background()
	w := written{what: what, at: time.Now()}
	var problems []string
	n := &corev1.Namespace{}
	if err := rc.base.Get(ctx, client.ObjectKey{Name: rc.ns}, n); err != nil {
		if !apierrors.IsNotFound(err) {
			problems = append(problems, fmt.Sprintf("after %s: reading the namespace: %v", what, err))
		}
		rc.record(w, problems)
		return
	}
	w.routed = n.Labels["istio.io/use-waypoint"] != "" || n.Labels["istio.io/ingress-use-waypoint"] != ""
	w.idleSince = n.Labels[waypoint.IdleSinceLabel]
	gw := &gatewayv1.Gateway{}
	switch err := rc.base.Get(ctx, client.ObjectKey{Namespace: rc.ns, Name: "waypoint"}, gw); {
	case err == nil:
		w.gateway = gw.DeletionTimestamp.IsZero()
		c := apimeta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
		w.programmed = w.gateway && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gw.Generation && len(gw.Status.Addresses) > 0
	case !apierrors.IsNotFound(err):
		problems = append(problems, fmt.Sprintf("after %s: reading the Gateway: %v", what, err))
	}
	if w.routed && !w.programmed {
		problems = append(problems, fmt.Sprintf("after %s: routed (labels %v) while the waypoint is missing (%t) or not Programmed at its generation",
			what, n.Labels, !w.gateway))
	}
	if n.Labels["istio.io/dataplane-mode"] == "ambient" {
		zt := &istiosecurityv1.AuthorizationPolicy{}
		err := rc.base.Get(ctx, client.ObjectKey{Namespace: rc.ns, Name: "ns-owner-access-istio-ztunnel"}, zt)
		if err != nil || !plugin.IsManagedBy(zt.Labels, "authz") {
			problems = append(problems, fmt.Sprintf("after %s: ambient without the plugins' ztunnel policy (%v)", what, err))
		}
	}
	p := &profilev1.Profile{}
	if err := rc.base.Get(ctx, client.ObjectKey{Name: rc.ns}, p); err == nil {
		if c := profileCondition(p); c != nil {
			w.condition = c.Message
		}
	}
	rc.record(w, problems)
}

func profileCondition(p *profilev1.Profile) *profilev1.ProfileCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == kubeflow.ConditionType {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func (rc *routingCheck) record(w written, problems []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.log = append(rc.log, w)
	rc.failOpen = append(rc.failOpen, problems...)
}

// mark is the number of writes so far.
func (rc *routingCheck) mark() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.log)
}

// since is the writes after the first n.
func (rc *routingCheck) since(n int) []written {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]written(nil), rc.log[n:]...)
}

// whats is the description of each write.
func whats(ws []written) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.what
	}
	return out
}

// requireClosed fails the test if any write so far left the namespace open.
func (rc *routingCheck) requireClosed(t *testing.T, when string) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Empty(t, rc.failOpen, "%s: fail-open states after the controller's writes", when)
}

// profileCalls wraps the Reconciler and keeps the results of the Profile's reconciles, and the
// Reconciler's metrics.
type profileCalls struct {
	next    reconcile.Reconciler
	name    string
	metrics *Metrics

	mu      sync.Mutex
	results []ctrl.Result
	errs    []error
}

func (p *profileCalls) wrap(r *Reconciler) reconcile.Reconciler {
	p.next, p.metrics = r, r.Metrics
	return p
}

func (p *profileCalls) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := p.next.Reconcile(ctx, req)
	if req.Name == p.name {
		p.mu.Lock()
		p.results, p.errs = append(p.results, res), append(p.errs, err)
		p.mu.Unlock()
	}
	return res, err
}

func (p *profileCalls) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.results)
}

// quiet waits until the Profile was reconciled at least once and then not for a second, and
// returns the last call's outcome.
func (p *profileCalls) quiet(t *testing.T, when string) (ctrl.Result, error) {
	t.Helper()
	last := -1
	require.Eventually(t, func() bool {
		n := p.count()
		settled := n > 0 && n == last
		last = n
		return settled
	}, time.Minute, time.Second, "%s: the controller settles", when)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.results[len(p.results)-1], p.errs[len(p.errs)-1]
}

func (p *profileCalls) waypoints(state string) float64 {
	return testutil.ToFloat64(p.metrics.waypoints.WithLabelValues(state))
}

// The reference controller runs mesh.waypoint.provision onDemand (reconciling only this test's
// Profile on the shared API server), driven only by what a cluster
// would do: a Profile, then a Service and its EndpointSlice written as the EndpointSlice
// controller writes them (envtest runs no controllers), and istiod's Programmed status
// (programWaypoint). Each write of the controller is followed by a read of the namespace on the
// API server (routingCheck): it is never routed to a waypoint that is missing or not Programmed.
// idleAfter is a few seconds: validation refuses only zero and less (under a minute is a
// warning), and the flap step needs a window the test can reliably write inside of under load.
func TestOnDemandControllerFollowsTheEndpointSliceWatch(t *testing.T) {
	t.Parallel()
	began := time.Now()
	env := envtest.Start(t).Counted(t)
	step := func(name string) { t.Logf("%6.1fs %s", time.Since(began).Seconds(), name) }
	const idleAfter = 5 * time.Second
	cfg := fixture.Config(t, "mesh: {waypoint: {provision: onDemand, idleAfter: 5s}}\n")
	require.Equal(t, idleAfter, cfg.Mesh.Waypoint.IdleAfterDuration())
	const ns, owner = "ondemand-ctl", "olga@example.com"
	c := env.Client
	ctx := context.Background()
	check := &routingCheck{base: c, ns: ns}
	// Also when a step failed first: every fail-open state the check saw is reported.
	t.Cleanup(func() { check.requireClosed(t, "at the end") })
	calls := &profileCalls{name: ns}
	_, stop := runManager(t, env.Config, ctrl.Options{NewClient: check.newClient}, cfg, only(calls.wrap, ns))
	t.Cleanup(stop)
	h := &harness{t: t, env: env}

	labels := func() map[string]string {
		n := &corev1.Namespace{}
		if c.Get(ctx, client.ObjectKey{Name: ns}, n) != nil {
			return nil
		}
		return n.Labels
	}
	hasGateway := func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "waypoint"}, &gatewayv1.Gateway{}) == nil
	}
	condition := func() string {
		p := &profilev1.Profile{}
		if c.Get(ctx, client.ObjectKey{Name: ns}, p) != nil || profileCondition(p) == nil {
			return ""
		}
		return profileCondition(p).Message
	}
	// waitCondition waits for the Profile's condition to contain every part.
	waitCondition := func(why string, parts ...string) {
		t.Helper()
		var last string
		ok := assert.Eventually(t, func() bool {
			last = condition()
			for _, p := range parts {
				if !strings.Contains(last, p) {
					return false
				}
			}
			return true
		}, time.Minute, 50*time.Millisecond, "%s: the Profile's condition says %q", why, parts)
		require.True(t, ok, "%s: the condition says %q", why, last)
	}
	idleSince := func() time.Time {
		t.Helper()
		s, err := strconv.ParseInt(labels()[waypoint.IdleSinceLabel], 10, 64)
		require.NoError(t, err, "the idle-since label")
		return time.Unix(s, 0)
	}
	rfc := func(at time.Time) string { return at.UTC().Format(time.RFC3339) }
	policy := func(name string) bool {
		p := &istiosecurityv1.AuthorizationPolicy{}
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p) == nil && plugin.IsManagedBy(p.Labels, "authz")
	}
	const sliceName = "notebook-7x2kq"
	setEndpoints := func(n int) {
		t.Helper()
		es := &discoveryv1.EndpointSlice{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sliceName}, es))
		es.Endpoints = nil
		for i := range n {
			// A pod that starts: an address, not ready yet.
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.0.%d", 7+i)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("notebook-%d", i)}})
		}
		require.NoError(t, c.Update(ctx, es))
	}

	step("API server started")
	// 1. A new Profile, nothing served: enrolled and closed, no waypoint, not routed.
	createProfile(t, c, ns, owner)
	require.Eventually(t, func() bool {
		l := labels()
		return l["istio.io/dataplane-mode"] == "ambient" && l[waypoint.IdleSinceLabel] != "" &&
			policy("ns-owner-access-istio-ztunnel") && policy("ns-owner-access-istio")
	}, time.Minute, 50*time.Millisecond, "the new namespace is enrolled (dataplane-mode ambient), closed (ztunnel and owner policies) and labelled idle")
	since := idleSince()
	waitCondition("idle from the start", waypoint.Idle+" "+rfc(since)+": no Service endpoint in namespace "+ns+", so no waypoint runs")
	res, err := calls.quiet(t, "idle")
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{}, res, "an idle namespace without a waypoint asks for no requeue: only a watch brings the controller back")
	assert.False(t, hasGateway(), "no Gateway while nothing is served")
	assert.NotContains(t, labels(), "istio.io/use-waypoint")
	assert.NotContains(t, labels(), "istio.io/ingress-use-waypoint")
	assert.Equal(t, 1.0, calls.waypoints("idle"), "profile_plugins_waypoints{state=idle}")
	assert.Equal(t, 0.0, calls.waypoints("active"), "profile_plugins_waypoints{state=active}")
	check.requireClosed(t, "idle")

	step("1. idle from the start")
	// 2. A notebook starts: its Service, and the EndpointSlice the EndpointSlice controller writes
	// for it, one endpoint not ready yet. The watch alone brings the Gateway (the last reconcile
	// asked for no requeue); routed once istiod says Programmed.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"statefulset": "notebook"},
			Ports: []corev1.ServicePort{{Name: "http-notebook", Port: 80, TargetPort: intstr.FromInt32(8888)}}}}
	require.NoError(t, c.Create(ctx, svc))
	mark := check.mark()
	require.NoError(t, c.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: sliceName, Namespace: ns,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http-notebook"), Port: ptr.To[int32](8888), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}))
	setEndpoints(1)
	require.Eventually(t, hasGateway, 30*time.Second, 20*time.Millisecond,
		"the EndpointSlice watch makes the Gateway (no requeue was pending)")
	// The check records a write once it read the namespace after it.
	require.Eventually(t, func() bool { return check.mark() > mark }, 10*time.Second, 10*time.Millisecond, "the Gateway's write is recorded")
	assert.Equal(t, "apply Gateway/waypoint", check.since(mark)[0].what, "the Gateway is the first write: %v", whats(check.since(mark)))
	waitCondition("starting", waypoint.WaitingForWaypoint+": "+waypoint.Starting+" (a Service endpoint appeared)")
	assert.NotContains(t, labels(), "istio.io/use-waypoint", "not routed before Programmed")
	h.programWaypoint(ns)
	require.Eventually(t, func() bool {
		l := labels()
		return l["istio.io/use-waypoint"] == "waypoint" && l["istio.io/ingress-use-waypoint"] == "true" && l[waypoint.IdleSinceLabel] == ""
	}, 30*time.Second, 20*time.Millisecond, "routed once Programmed, the idle-since label gone")
	waitCondition("active", "all plugins applied")
	assert.Equal(t, 1.0, calls.waypoints("active"), "profile_plugins_waypoints{state=active}")
	assert.Equal(t, 0.0, calls.waypoints("idle"), "profile_plugins_waypoints{state=idle}")
	check.requireClosed(t, "active")

	step("2. activated")
	// 3. The notebook is culled: its slice stays, without endpoints. The waypoint stays, routed,
	// for idleAfter; then the routing labels go, and only after them the Gateway.
	mark = check.mark()
	setEndpoints(0)
	require.Eventually(t, func() bool { return labels()[waypoint.IdleSinceLabel] != "" }, 30*time.Second, 20*time.Millisecond,
		"the endpoint's going is observed: the namespace is labelled idle-since")
	since = idleSince()
	deadline := since.Add(idleAfter)
	require.Eventually(t, func() bool { return !hasGateway() }, time.Minute, 50*time.Millisecond, "the Gateway is deleted after idleAfter")
	// The reconcile that deletes the Gateway says so; the next ones, which find none, say that no
	// waypoint runs.
	waitCondition("idle past the window", waypoint.Idle+" "+rfc(since)+": no Service endpoint in namespace "+ns+", so no waypoint runs")
	ws := check.since(mark)
	unrouted, deleted := -1, -1
	for i, w := range ws {
		if !w.routed && unrouted < 0 {
			unrouted = i
		}
		if w.what == "delete Gateway/waypoint" && deleted < 0 {
			deleted = i
		}
	}
	require.GreaterOrEqual(t, unrouted, 0, "the routing labels came off: %v", whats(ws))
	require.GreaterOrEqual(t, deleted, 0, "the Gateway was deleted by the controller: %v", whats(ws))
	assert.Less(t, unrouted, deleted, "routing off first, then the delete: %v", whats(ws))
	assert.Equal(t, "apply labels of Namespace/"+ns, ws[unrouted].what)
	saidWithdrawn := false
	for _, w := range ws[unrouted:deleted] {
		saidWithdrawn = saidWithdrawn || strings.Contains(w.condition, waypoint.Idle+" "+rfc(since)+": routing to Gateway "+ns+"/waypoint withdrawn")
	}
	assert.True(t, saidWithdrawn, "between the two, the condition said that routing was withdrawn")
	saidDeleted := false
	for _, w := range ws[deleted:] {
		saidDeleted = saidDeleted || strings.Contains(w.condition, waypoint.Idle+" "+rfc(since)+": no Service endpoint in namespace "+ns+
			" for 5s (mesh.waypoint.idleAfter), so Gateway waypoint is deleted")
	}
	assert.True(t, saidDeleted, "the reconcile that deleted the Gateway said so in the condition")
	assert.False(t, ws[unrouted].at.Before(deadline), "routing withdrawn at %s, before the window's end %s", ws[unrouted].at, deadline)
	for _, w := range ws[:unrouted] {
		assert.True(t, w.gateway && w.routed, "inside the window the waypoint stays and routed: after %s", w.what)
	}
	assert.Equal(t, "ambient", labels()["istio.io/dataplane-mode"], "idle, the namespace stays enrolled")
	assert.True(t, policy("ns-owner-access-istio-ztunnel") && policy("ns-owner-access-istio"), "idle, the namespace stays closed")
	assert.Equal(t, strconv.FormatInt(since.Unix(), 10), labels()[waypoint.IdleSinceLabel], "the window's start stays")
	check.requireClosed(t, "deactivated")

	step("3. deactivated")
	// 4. Active again, then a flap: the endpoint goes and comes back inside the window. The
	// Gateway is neither deleted nor rewritten, and routing never comes off, also past the
	// window's end (a reconcile then, from an unrelated namespace change, keeps it).
	setEndpoints(1)
	require.Eventually(t, hasGateway, 30*time.Second, 20*time.Millisecond, "an endpoint again: the Gateway again")
	waitCondition("starting again", waypoint.Starting)
	h.programWaypoint(ns)
	require.Eventually(t, func() bool { return labels()["istio.io/use-waypoint"] == "waypoint" }, 30*time.Second, 20*time.Millisecond, "routed again")
	_, err = calls.quiet(t, "active again")
	require.NoError(t, err)
	mark = check.mark()
	setEndpoints(0)
	require.Eventually(t, func() bool { return labels()[waypoint.IdleSinceLabel] != "" }, 30*time.Second, 10*time.Millisecond, "idle again")
	deadline = idleSince().Add(idleAfter)
	setEndpoints(1)
	require.True(t, time.Now().Before(deadline), "the endpoint came back inside the window (the machine took longer than idleAfter)")
	require.Eventually(t, func() bool { return labels()[waypoint.IdleSinceLabel] == "" }, 30*time.Second, 10*time.Millisecond, "active again: the idle-since label goes")
	time.Sleep(time.Until(deadline) + time.Second)
	before := calls.count()
	n := h.namespace(ns)
	n.Annotations["example.com/touched"] = "past the old deadline"
	require.NoError(t, c.Update(ctx, n))
	require.Eventually(t, func() bool { return calls.count() > before }, 30*time.Second, 20*time.Millisecond, "the namespace change reconciles the Profile")
	_, err = calls.quiet(t, "past the old deadline")
	require.NoError(t, err)
	assert.True(t, hasGateway(), "the flap keeps the Gateway")
	assert.Equal(t, "waypoint", labels()["istio.io/use-waypoint"], "the flap keeps the routing")
	for _, w := range check.since(mark) {
		assert.True(t, w.routed && w.programmed, "the flap never unroutes: after %s", w.what)
		assert.NotContains(t, w.what, "Gateway/waypoint", "the flap neither rewrites nor deletes the Gateway: %v", whats(check.since(mark)))
	}
	check.requireClosed(t, "flap")

	step("4. flap")
	// 5. Idle for good (the slice deleted, as when the Service goes), then a restart while idle:
	// the new manager reconciles the Profile and writes nothing, so creates nothing.
	require.NoError(t, c.Delete(ctx, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sliceName}}))
	require.Eventually(t, func() bool { return !hasGateway() }, time.Minute, 50*time.Millisecond, "the slice deleted, the Gateway goes after idleAfter")
	waitCondition("idle for good", "so no waypoint runs")
	_, err = calls.quiet(t, "idle for good")
	require.NoError(t, err)
	idleLabel := labels()[waypoint.IdleSinceLabel]
	stop()
	mark = check.mark()
	restarted := &profileCalls{name: ns}
	_, stop = runManager(t, env.Config, ctrl.Options{NewClient: check.newClient}, cfg, only(restarted.wrap, ns))
	t.Cleanup(stop)
	res, err = restarted.quiet(t, "restarted while idle")
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{}, res, "idle after a restart: no requeue")
	assert.Empty(t, whats(check.since(mark)), "a restart while idle writes nothing")
	assert.False(t, hasGateway(), "a restart while idle creates no Gateway")
	assert.NotContains(t, labels(), "istio.io/use-waypoint")
	assert.Equal(t, idleLabel, labels()[waypoint.IdleSinceLabel], "the restart keeps the window's start")
	assert.Equal(t, 1.0, restarted.waypoints("idle"), "the restarted controller counts the namespace idle")
	check.requireClosed(t, "restarted")
	step("5. restarted while idle")
	t.Logf("controller writes: %v", whats(check.since(0)))
}
