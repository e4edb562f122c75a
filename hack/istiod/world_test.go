package istiod

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/hack/istiod/harness"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

func TestMain(m *testing.M) { envtest.Main(m) }

const (
	waypoint      = "waypoint"
	ztunnelPolicy = "ns-owner-access-istio-ztunnel"
	ownerPolicy   = "ns-owner-access-istio"
	useWaypoint   = "istio.io/use-waypoint"
	// wait is how long istiod and the controller get for each step on a loaded two-core machine.
	wait = 2 * time.Minute
)

// world is one test's cluster: the shared test API server, a fresh istiod, the stand-in, a
// ztunnel-like xDS client and the reference controller.
type world struct {
	t          *testing.T
	c          client.Client
	kubeconfig string
	istiod     *harness.Istiod
	standIn    *harness.StandIn
	ztunnel    *harness.Ztunnel
	controller *harness.Controller
	env        *envtest.Env
}

// start applies `render -cluster` of config and starts istiod, the stand-in, the xDS client and
// the controller with config.
func start(t *testing.T, config string) *world {
	t.Helper()
	env := envtest.Start(t)
	w := &world{t: t, c: env.Client, env: env, kubeconfig: env.Kubeconfig(t)}
	harness.ApplyClusterObjects(t, w.c, config)
	w.istiod = harness.StartIstiod(t, w.c, w.kubeconfig)
	w.standIn = harness.StartStandIn(t, w.c)
	w.ztunnel = harness.ConnectZtunnel(t, w.istiod.XDS)
	w.controller = harness.StartController(t, w.kubeconfig, config)
	return w
}

// reconfigure applies `render -cluster` of config and restarts the controller with it, as an admin
// changes the configuration.
func (w *world) reconfigure(config string) {
	w.t.Helper()
	w.controller.Stop()
	harness.ApplyClusterObjects(w.t, w.c, config)
	w.controller = harness.StartController(w.t, w.kubeconfig, config)
}

// pluginConfig is a PluginConfig in ambient mode with Pod Security enforce restricted; extra is
// YAML under mesh.waypoint.
func pluginConfig(waypointYAML string) string {
	return "apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1\nkind: PluginConfig\n" +
		"mesh:\n  mode: ambient\n  waypoint:\n" + indent(waypointYAML, 4) +
		"podSecurity:\n  enforce: {level: restricted}\n"
}

func indent(s string, n int) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(strings.Repeat(" ", n) + l + "\n")
	}
	return b.String()
}

// profile creates a Profile owned by a user, with plugins entries if any, and lets the stand-in act
// in its namespace.
func (w *world) profile(name string, plugins ...profilev1.Plugin) {
	w.t.Helper()
	w.standIn.Watch(name)
	p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: profilev1.ProfileSpec{Owner: rbacv1.Subject{Kind: "User", Name: name + "@example.com"}, Plugins: plugins}}
	if err := w.c.Create(w.t.Context(), p); err != nil {
		w.t.Fatalf("creating Profile %s: %v", name, err)
	}
}

// handedOver creates namespace ns as an admin does before its Profile (owner annotation, labels),
// with the default ServiceAccount pods need (no controller-manager runs here).
func (w *world) handedOver(ns string, labels map[string]string) {
	w.t.Helper()
	must(w.t, w.c.Create(w.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels,
		Annotations: map[string]string{"owner": ns + "@example.com"}}}), "creating namespace "+ns)
	w.serviceAccount(ns)
}

func (w *world) serviceAccount(ns string) {
	w.t.Helper()
	err := w.c.Create(w.t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}})
	must(w.t, client.IgnoreAlreadyExists(err), "creating ServiceAccount default in "+ns)
}

// workload creates a Pod and a Service selecting it in ns, as a user's notebook has; the stand-in
// makes it ready and writes the Service's EndpointSlice. It complies with Pod Security restricted.
func (w *world) workload(ns, name string) *corev1.Pod {
	w.t.Helper()
	w.serviceAccount(ns)
	no, yes := false, true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "app", Image: "example.invalid/notebook", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}}}}
	must(w.t, w.c.Create(w.t.Context(), pod), "creating Pod "+ns+"/"+name)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	must(w.t, w.c.Create(w.t.Context(), svc), "creating Service "+ns+"/"+name)
	return pod
}

// eventually polls cond every 250 ms until it holds, failing with what last said otherwise.
func (w *world) eventually(what string, cond func() (bool, string)) {
	w.t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < wait {
		ok, why := cond()
		if ok {
			w.t.Logf("%s: after %s", what, time.Since(start).Round(100*time.Millisecond))
			return
		}
		last = why
		time.Sleep(250 * time.Millisecond)
	}
	w.t.Fatalf("%s: not within %s; last: %s\ncontroller log:\n%s\nistiod log (%s)", what, wait, last, tailFile(w.controller.Log), w.istiod.Log)
}

func (w *world) get(obj client.Object, ns, name string) error {
	return w.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
}

// routed waits until namespace ns is routed through its waypoint.
func (w *world) routed(ns string) {
	w.t.Helper()
	w.eventually(ns+" routed through its waypoint", func() (bool, string) {
		n := &corev1.Namespace{}
		if err := w.get(n, "", ns); err != nil {
			return false, err.Error()
		}
		return n.Labels[useWaypoint] == waypoint, fmt.Sprintf("labels %v", n.Labels)
	})
}

// unrouted waits until namespace ns has no routing label.
func (w *world) unrouted(ns string) {
	w.t.Helper()
	w.eventually(ns+" no longer routed", func() (bool, string) {
		n := &corev1.Namespace{}
		if err := w.get(n, "", ns); err != nil {
			return false, err.Error()
		}
		_, has := n.Labels[useWaypoint]
		return !has, fmt.Sprintf("labels %v", n.Labels)
	})
}

// programmedGateway waits until istiod reports ns's waypoint Programmed at its generation and
// returns it, checking and logging that the status is istiod's own write.
func (w *world) programmedGateway(ns string) *gatewayv1.Gateway {
	w.t.Helper()
	gw := &gatewayv1.Gateway{}
	w.eventually(ns+"/waypoint Programmed by istiod", func() (bool, string) {
		if err := w.get(gw, ns, waypoint); err != nil {
			return false, err.Error()
		}
		return programmed(gw), fmt.Sprintf("conditions %v", gw.Status.Conditions)
	})
	w.istiodWroteStatus(gw)
	return gw
}

// istiodWroteStatus logs the Gateway's field managers and requires its status to be written by
// istiod (pilot-discovery, status subresource) and by no one else.
func (w *world) istiodWroteStatus(gw *gatewayv1.Gateway) {
	w.t.Helper()
	w.t.Logf("Gateway %s/%s generation %d: managedFields managers %v", gw.Namespace, gw.Name, gw.Generation, harness.Managers(gw))
	if !harness.ManagesField(gw, harness.IstiodStatusManager, "status", "f:status.f:conditions") {
		w.t.Errorf("Gateway %s/%s: status.conditions not written by %s: %v", gw.Namespace, gw.Name, harness.IstiodStatusManager, harness.Managers(gw))
	}
	for _, m := range gw.ManagedFields {
		if m.Subresource == "status" && m.Manager != harness.IstiodStatusManager {
			w.t.Errorf("Gateway %s/%s: status written by %s, not only by istiod", gw.Namespace, gw.Name, m.Manager)
		}
	}
}

// deployedByIstiod waits for ns's waypoint Deployment, requires it to be server-side applied by
// istiod's gateway controller and owned by the Gateway, logs its managers and returns it.
func (w *world) deployedByIstiod(ns string, check func(*appsv1.Deployment) (bool, string)) *appsv1.Deployment {
	w.t.Helper()
	d := &appsv1.Deployment{}
	w.eventually(ns+"/waypoint Deployment applied by istiod", func() (bool, string) {
		if err := w.get(d, ns, waypoint); err != nil {
			return false, err.Error()
		}
		if check == nil {
			return true, ""
		}
		return check(d)
	})
	w.t.Logf("Deployment %s/%s: managedFields managers %v", ns, d.Name, harness.Managers(d))
	if !harness.ManagesField(d, harness.IstiodApplyManager, "", "f:spec.f:template") {
		w.t.Errorf("Deployment %s/%s: spec.template not applied by %s: %v", ns, d.Name, harness.IstiodApplyManager, harness.Managers(d))
	}
	if !slices.ContainsFunc(d.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "Gateway" && r.Name == waypoint }) {
		w.t.Errorf("Deployment %s/%s: ownerReferences %v, want the Gateway", ns, d.Name, d.OwnerReferences)
	}
	return d
}

func programmed(gw *gatewayv1.Gateway) bool {
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gw.Generation && len(gw.Status.Addresses) > 0
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func gone(err error) bool { return apierrors.IsNotFound(err) }

func tailFile(path string) string {
	out, err := readTail(path, 25)
	if err != nil {
		return err.Error()
	}
	return out
}

// recorder watches one kind across namespaces and keeps every object it sees, in order, with its
// resourceVersion: etcd's revision, which orders writes across objects of one API server.
type recorder struct {
	mu   sync.Mutex
	seen []runtime.Object
}

func record(t *testing.T, env *envtest.Env, list client.ObjectList) *recorder {
	t.Helper()
	wc, err := client.NewWithWatch(env.Base, client.Options{Scheme: envtest.NewScheme()})
	must(t, err, "a watching client")
	wi, err := wc.Watch(t.Context(), list)
	must(t, err, fmt.Sprintf("watching %T", list))
	r := &recorder{}
	go func() {
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				r.mu.Lock()
				r.seen = append(r.seen, ev.Object)
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(wi.Stop)
	return r
}

func (r *recorder) objects() []client.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]client.Object, 0, len(r.seen))
	for _, o := range r.seen {
		out = append(out, o.(client.Object))
	}
	return out
}

func revisionOf(o metav1.Object) uint64 {
	n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return n
}

// managersOf is harness.Managers, for the objects checked in passing.
func managersOf(o client.Object) []string { return harness.Managers(o) }
