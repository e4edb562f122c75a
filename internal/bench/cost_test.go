package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"istio.io/api/label"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// costShares are the shares of Profile namespaces with a running notebook the cost benchmark
// measures, in percent: 24% is the share a Kubeflow maintainer estimates (a namespace idle about
// 76% of the week; shared/seeds/002).
var costShares = []int{0, 10, 24, 50, 100}

// costModes are the data planes compared: ambient with a waypoint in every namespace, ambient
// with waypoints on demand, and sidecars.
var costModes = []struct{ name, config string }{
	{"always", "mesh: {mode: ambient, waypoint: {provision: always}}\n"},
	{"onDemand", "mesh: {mode: ambient, waypoint: {provision: onDemand, idleAfter: 1h}}\n"},
	{"sidecar", "mesh: {mode: sidecar}\n"},
}

// BenchmarkCost runs the reference controller (cmd/profile-plugins-controller, built and started
// as its own process) over BENCH_PROFILES Profile namespaces on the real API server for each mode
// of costModes. Every namespace has a notebook Service; an active one has an endpoint in its
// EndpointSlice (a running notebook pod), a culled one an EndpointSlice without endpoints (the
// notebook controller scaled the StatefulSet to zero). For each share of costShares, from 0% up,
// it activates that many namespaces, waits until the controller has converged (the Gateways it
// keeps and the namespaces it routes), counts the waypoints and computes what they reserve from
// the class defaults the configuration emits (waypoint.ClassDefaults: requests times the smallest
// replica count), against sidecar mode's one istio-proxy per running pod at Istio's sidecar
// requests (config.IstioSidecarResources). Node agents (ztunnel, istio-cni) run in both and are
// left out.
//
// The benchmark plays istiod for the Gateways: it marks each one Programmed with an address as soon
// as it sees it. In onDemand mode the namespaces of the first step (0% to 10%) are activated one
// at a time, and for each it measures, from its own watches, the time from the EndpointSlice
// update to the Gateway appearing and from the Gateway's Programmed status to the namespace's
// istio.io/use-waypoint label; later steps activate their namespaces at once.
func BenchmarkCost(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("the cost benchmark measures one pass; run it with -benchtime=1x (b.N=%d)", b.N)
	}
	k := readKnobs(b)
	envtest.ForScale()
	env := envtest.Start(b)
	ctx := context.Background()
	c, err := client.NewWithWatch(unthrottled(env.Base), client.Options{Scheme: envtest.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	bin := buildController(b)
	kubeconfig := writeKubeconfig(b, env.Base)
	for _, mode := range costModes {
		cfg := fixture.Config(b, mode.config)
		cm, err := waypoint.ClassDefaults(cfg)
		if err != nil {
			b.Fatal(err)
		}
		size := waypointSize(b, cm.Data)
		run := &costRun{c: c, mode: mode.name, n: k.n, prefix: "cost-" + strings.ToLower(mode.name) + "-", ambient: cfg.Mesh.Mode == config.ModeAmbient,
			seen: map[string]time.Time{}, programmed: map[string]time.Time{}, routed: map[string]time.Time{}}
		run.setup(ctx, b)
		stop := run.watch(ctx, b)
		ctl := startController(b, bin, kubeconfig, mode.config)
		active := 0
		var latency []activation
		for _, share := range costShares {
			want := int(math.Round(float64(share) * float64(k.n) / 100))
			if mode.name == "onDemand" && active == 0 && want > 0 {
				latency = run.activateOneByOne(ctx, b, active, want)
			} else {
				run.activate(ctx, b, active, want)
			}
			active = want
			got, converged := run.converge(ctx, b, active)
			waypoints := got.gateways
			pods := active // one notebook pod per active namespace: one endpoint each
			cpu, mem := float64(waypoints*int(size.replicas))*size.cpuMilli, float64(waypoints*int(size.replicas))*size.memMiB
			if !run.ambient {
				sidecar := config.IstioSidecarResources().Requests
				cpu = float64(pods) * float64(sidecar.Cpu().MilliValue())
				mem = float64(pods) * mib(sidecar.Memory())
			}
			b.Run(fmt.Sprintf("cost/%s/share=%d/N=%d", mode.name, share, k.n), func(b *testing.B) {
				b.ReportMetric(float64(waypoints), "waypoints")
				b.ReportMetric(float64(pods), "running-pods")
				b.ReportMetric(cpu, "reserved-mCPU")
				b.ReportMetric(mem, "reserved-MiB")
				b.ReportMetric(boolMetric(converged), "converged")
				if mode.name == "onDemand" {
					// Of the idle namespaces, those closed (ambient with the ztunnel policy) without a waypoint.
					b.ReportMetric(float64(k.n-active), "idle")
					b.ReportMetric(float64(got.idleClosed), "idle-closed-no-waypoint")
				}
			})
			if !converged {
				b.Errorf("%s at %d%% active: the controller did not converge (%d waypoints for %d active namespaces)", mode.name, share, waypoints, active)
			}
		}
		if len(latency) > 0 {
			toGateway, toRouted := make([]float64, 0, len(latency)), make([]float64, 0, len(latency))
			for _, a := range latency {
				toGateway = append(toGateway, a.toGateway.Seconds()*1000)
				toRouted = append(toRouted, a.toRouted.Seconds()*1000)
			}
			b.Run(fmt.Sprintf("cost/latency/%s/N=%d", mode.name, k.n), func(b *testing.B) {
				b.ReportMetric(quantile(toGateway, 0.5), "endpoint-to-gateway-p50-ms")
				b.ReportMetric(quantile(toGateway, 0.99), "endpoint-to-gateway-p99-ms")
				b.ReportMetric(quantile(toRouted, 0.5), "programmed-to-routed-p50-ms")
				b.ReportMetric(quantile(toRouted, 0.99), "programmed-to-routed-p99-ms")
				b.ReportMetric(float64(len(latency)), "samples")
			})
		}
		ctl.stop(b)
		stop()
		run.teardown(ctx, b)
	}
}

// size is what one waypoint reserves, from the class defaults' overlays.
type size struct {
	cpuMilli, memMiB float64
	replicas         int32
}

// waypointSize reads the container requests and the smallest replica count from the class
// defaults' overlays, which is what istiod renders into every waypoint: requests missing there are
// Istio's chart defaults, and with an autoscaler the count is its minReplicas.
func waypointSize(b *testing.B, data map[string]string) size {
	var d appsv1.Deployment
	if err := yaml.Unmarshal([]byte(data["deployment"]), &d); err != nil {
		b.Fatal(err)
	}
	req := config.IstioWaypointResources().Requests
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == waypoint.SidecarContainer {
			for name, q := range c.Resources.Requests {
				req[name] = q
			}
		}
	}
	s := size{cpuMilli: float64(req.Cpu().MilliValue()), memMiB: mib(req.Memory()), replicas: 1}
	if d.Spec.Replicas != nil {
		s.replicas = *d.Spec.Replicas
	}
	if h, ok := data["horizontalPodAutoscaler"]; ok {
		var hpa autoscalingv2.HorizontalPodAutoscaler
		if err := yaml.Unmarshal([]byte(h), &hpa); err != nil {
			b.Fatal(err)
		}
		s.replicas = ptr.Deref(hpa.Spec.MinReplicas, 1)
	}
	return s
}

func mib(q *resource.Quantity) float64 { return float64(q.Value()) / (1 << 20) }

func boolMetric(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// quantile is the q-quantile of vs by the nearest rank.
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// costRun is one mode's namespaces and what the benchmark saw happen in them.
type costRun struct {
	c       client.WithWatch
	mode    string
	n       int
	prefix  string
	ambient bool

	mu                       sync.Mutex
	seen, programmed, routed map[string]time.Time // by namespace: Gateway first seen, Programmed written, routed seen
}

func (r *costRun) ns(i int) string { return fmt.Sprintf("%s%05d", r.prefix, i) }

// setup creates the namespaces as an admin hands them over (the owner annotation), each with a
// culled notebook (a Service and an EndpointSlice without endpoints), and their Profiles.
func (r *costRun) setup(ctx context.Context, b *testing.B) {
	nss := make([]string, r.n)
	for i := range nss {
		nss[i] = r.ns(i)
	}
	err := parallel(nss, func(ns string) error {
		owner := ns + "@example.com"
		objs := []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{ownership.OwnerAnnotation: owner}}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: ns},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"statefulset": "notebook"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "notebook-1", Namespace: ns,
				Labels: map[string]string{discoveryv1.LabelServiceName: "notebook", discoveryv1.LabelManagedBy: plugin.EndpointSliceController}},
				AddressType: discoveryv1.AddressTypeIPv4},
			&profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: profilev1.ProfileSpec{Owner: fixture.User(owner)}},
		}
		for _, o := range objs {
			if err := r.c.Create(ctx, o); err != nil {
				return fmt.Errorf("creating %T %s: %w", o, ns, err)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// teardown lets the next mode's controller see none of these Profiles: the finalizer goes first
// (the controller is stopped, so nothing would revoke), then the Profile.
func (r *costRun) teardown(ctx context.Context, b *testing.B) {
	var list profilev1.ProfileList
	if err := r.c.List(ctx, &list); err != nil {
		b.Fatal(err)
	}
	var mine []*profilev1.Profile
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Name, r.prefix) {
			mine = append(mine, &list.Items[i])
		}
	}
	err := parallel(mine, func(p *profilev1.Profile) error {
		if len(p.Finalizers) > 0 {
			p.Finalizers = nil
			if err := r.c.Update(ctx, p); err != nil {
				return err
			}
		}
		return client.IgnoreNotFound(r.c.Delete(ctx, p))
	})
	if err != nil {
		b.Fatal(err)
	}
}

// activate gives namespaces [from, to) a notebook endpoint, at once.
func (r *costRun) activate(ctx context.Context, b *testing.B, from, to int) {
	idx := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		idx = append(idx, i)
	}
	if err := parallel(idx, func(i int) error { return r.addEndpoint(ctx, r.ns(i)) }); err != nil {
		b.Fatal(err)
	}
}

func (r *costRun) addEndpoint(ctx context.Context, ns string) error {
	s := &discoveryv1.EndpointSlice{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "notebook-1"}, s); err != nil {
		return err
	}
	// Not ready yet: the pod has an IP and its containers are starting, the moment the waypoint
	// should start too.
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.10"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "notebook-0"}}}
	return r.c.Update(ctx, s)
}

// activation is one namespace's latencies, measured from the benchmark's watches.
type activation struct{ toGateway, toRouted time.Duration }

// activateOneByOne activates namespaces [from, to) one after another, each once the previous one
// is routed, and returns their latencies.
func (r *costRun) activateOneByOne(ctx context.Context, b *testing.B, from, to int) []activation {
	var out []activation
	for i := from; i < to; i++ {
		ns := r.ns(i)
		began := time.Now()
		if err := r.addEndpoint(ctx, ns); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			r.mu.Lock()
			seen, programmed, routed := r.seen[ns], r.programmed[ns], r.routed[ns]
			r.mu.Unlock()
			if !routed.IsZero() {
				out = append(out, activation{toGateway: seen.Sub(began), toRouted: routed.Sub(programmed)})
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: not routed 30s after its endpoint appeared (Gateway seen: %v, Programmed: %v)", ns, !seen.IsZero(), !programmed.IsZero())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return out
}

// converge waits until the controller keeps the waypoints the mode wants for active namespaces
// (all of them with always, the active ones with onDemand, none with sidecars), routes exactly
// those and has enrolled every namespace (ambient with its ztunnel policy, or labelled for
// injection), and returns what it then counted. It gives up after two minutes plus 100 ms per
// namespace and returns what it counted last.
func (r *costRun) converge(ctx context.Context, b *testing.B, active int) (costCount, bool) {
	want := 0
	switch r.mode {
	case "always":
		want = r.n
	case "onDemand":
		want = active
	}
	deadline := time.Now().Add(2*time.Minute + time.Duration(r.n)*100*time.Millisecond)
	for {
		got := r.count(ctx, b, active)
		done := got.gateways == want && (r.ambient && got.routed == want && got.closed == r.n || !r.ambient && got.injected == r.n)
		if done || time.Now().After(deadline) {
			return got, done
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// costCount is what the controller keeps in the mode's namespaces.
type costCount struct {
	gateways int // waypoint Gateways the plugins made
	routed   int // namespaces labelled istio.io/use-waypoint
	injected int // namespaces labelled for sidecar injection
	closed   int // namespaces in ambient (istio.io/dataplane-mode) with their ztunnel policy
	// idleClosed counts the namespaces without an endpoint (index active and up) that are closed
	// and have no waypoint Gateway.
	idleClosed int
}

func (r *costRun) count(ctx context.Context, b *testing.B, active int) costCount {
	var got costCount
	var gws gatewayv1.GatewayList
	if err := r.c.List(ctx, &gws, client.MatchingLabels{plugin.ManagedByLabel: plugin.ManagedByValue}); err != nil {
		b.Fatal(err)
	}
	hasGateway := map[string]bool{}
	for _, gw := range gws.Items {
		if strings.HasPrefix(gw.Namespace, r.prefix) && gw.DeletionTimestamp == nil {
			got.gateways++
			hasGateway[gw.Namespace] = true
		}
	}
	idle := map[string]bool{}
	for i := active; i < r.n; i++ {
		idle[r.ns(i)] = true
	}
	var pols istiosecurityv1.AuthorizationPolicyList
	if err := r.c.List(ctx, &pols, client.MatchingLabels{plugin.ManagedByLabel: plugin.ManagedByValue}); err != nil {
		b.Fatal(err)
	}
	ztunnel := map[string]bool{}
	for _, p := range pols.Items {
		if p.Name == config.DefaultZtunnelPolicyName && p.DeletionTimestamp == nil {
			ztunnel[p.Namespace] = true
		}
	}
	var nss corev1.NamespaceList
	if err := r.c.List(ctx, &nss); err != nil {
		b.Fatal(err)
	}
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.Name, r.prefix) {
			continue
		}
		if ns.Labels[label.IoIstioUseWaypoint.Name] != "" {
			got.routed++
		}
		if ns.Labels[waypoint.InjectionLabel] == "enabled" {
			got.injected++
		}
		if ns.Labels[label.IoIstioDataplaneMode.Name] == "ambient" && ztunnel[ns.Name] {
			got.closed++
			if idle[ns.Name] && !hasGateway[ns.Name] {
				got.idleClosed++
			}
		}
	}
	return got
}

// watch plays istiod for the mode's Gateways (Programmed, with an address, at their generation)
// and records when each namespace's Gateway was first seen, Programmed and routed. The returned
// function stops it.
func (r *costRun) watch(ctx context.Context, b *testing.B) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.watchLoop(ctx, &gatewayv1.GatewayList{}, func(obj client.Object, at time.Time) {
			gw, ok := obj.(*gatewayv1.Gateway)
			if !ok || !strings.HasPrefix(gw.Namespace, r.prefix) || gw.DeletionTimestamp != nil {
				return
			}
			r.mu.Lock()
			if _, ok := r.seen[gw.Namespace]; !ok {
				r.seen[gw.Namespace] = at
			}
			r.mu.Unlock()
			if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gw.Generation {
				return
			}
			program(gw)
			if err := r.c.Status().Update(ctx, gw); err != nil {
				return // a newer version comes as its own event
			}
			r.mu.Lock()
			r.programmed[gw.Namespace] = time.Now()
			r.mu.Unlock()
		})
	}()
	go func() {
		defer wg.Done()
		r.watchLoop(ctx, &corev1.NamespaceList{}, func(obj client.Object, at time.Time) {
			if !strings.HasPrefix(obj.GetName(), r.prefix) || obj.GetLabels()[label.IoIstioUseWaypoint.Name] == "" {
				return
			}
			r.mu.Lock()
			if _, ok := r.routed[obj.GetName()]; !ok {
				r.routed[obj.GetName()] = at
			}
			r.mu.Unlock()
		})
	}()
	return func() { cancel(); wg.Wait() }
}

// watchLoop calls on for every added or modified object of list's kind until ctx ends, watching
// again from the last resource version when the API server closes a watch.
func (r *costRun) watchLoop(ctx context.Context, list client.ObjectList, on func(client.Object, time.Time)) {
	rv := ""
	for ctx.Err() == nil {
		w, err := r.c.Watch(ctx, list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			at := time.Now()
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = obj.GetResourceVersion()
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				on(obj, at)
			}
		}
		w.Stop()
	}
}

// program sets what istiod reports on a waypoint it has deployed.
func program(gw *gatewayv1.Gateway) {
	now := metav1.Now()
	ip := gatewayv1.IPAddressType
	gw.Status.Conditions = []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: gw.Generation, LastTransitionTime: now},
		{Type: "Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", ObservedGeneration: gw.Generation, LastTransitionTime: now},
	}
	gw.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Type: &ip, Value: "10.96.10.10"}}
}

// buildController builds the reference controller once per benchmark binary.
func buildController(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "profile-plugins-controller")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/profile-plugins-controller")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the reference controller: %v\n%s", err, out)
	}
	return bin
}

type controllerProc struct {
	cmd  *exec.Cmd
	done chan error
	out  *lockedWriter
}

// startController runs the reference controller with the PluginConfig doc.
func startController(b *testing.B, bin, kubeconfig, doc string) *controllerProc {
	path := filepath.Join(b.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: "+config.APIVersion+"\nkind: "+config.Kind+"\n"+doc), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", path, "-metrics-bind-address", "0", "-health-probe-bind-address", "0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out := &lockedWriter{w: &strings.Builder{}}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &controllerProc{cmd: cmd, done: make(chan error, 1), out: out}
	go func() { p.done <- cmd.Wait() }()
	return p
}

// stop ends the controller by its own process id and fails the benchmark if it had stopped early.
func (p *controllerProc) stop(b *testing.B) {
	select {
	case err := <-p.done:
		b.Fatalf("the reference controller stopped early: %v\n%s", err, tail(p.out.String(), 4000))
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		err = <-p.done
	}
	if err != nil {
		b.Logf("the reference controller, stopped: %v", err)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
