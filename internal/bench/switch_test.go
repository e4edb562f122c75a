package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// BenchmarkSwitch measures a full switch of mesh mode under load: the reference controller, as its
// own process, converges BENCH_PROFILES Profile namespaces in ambient (the benchmark plays istiod
// for their waypoints), and is restarted with mode sidecar, as an admin's configuration change
// does. It reports the wall time from the restart until every namespace is in sidecar mode (no
// waypoint Gateway, no ambient label or ztunnel policy, injection on), and the time a Profile
// created just after the restart takes to get its namespace labelled for injection: whether a new
// user waits behind the switch of everyone else.
func BenchmarkSwitch(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("the switch benchmark measures one pass; run it with -benchtime=1x (b.N=%d)", b.N)
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
	run := &costRun{c: c, mode: "always", n: k.n, prefix: "switch-", ambient: true,
		seen: map[string]time.Time{}, programmed: map[string]time.Time{}, routed: map[string]time.Time{}}
	run.setup(ctx, b)
	stop := run.watch(ctx, b)
	defer stop()
	ambient := startController(b, bin, kubeconfig, costModes[0].config)
	if _, ok := run.converge(ctx, b, 0); !ok {
		b.Fatalf("the %d namespaces did not converge in ambient mode", k.n)
	}
	ambient.stop(b)

	sidecar := startController(b, bin, kubeconfig, "mesh: {mode: sidecar}\n")
	defer sidecar.stop(b)
	began := time.Now()
	const newcomer = "newcomer-switch"
	createNewcomer(ctx, b, c, newcomer)
	run.mode, run.ambient = "sidecar", false
	var newcomerDone, switchDone, workersStarted time.Duration
	deadline := began.Add(2*time.Minute + time.Duration(k.n)*200*time.Millisecond)
	for (newcomerDone == 0 || switchDone == 0) && time.Now().Before(deadline) {
		// controller-runtime logs this once the controller's caches have synced and its workers
		// take requests (pkg/internal/controller/controller.go, Start): what comes before it is
		// start-up, what comes after is the queue.
		if workersStarted == 0 && profileWorkersStarted(sidecar.out.String()) {
			workersStarted = time.Since(began)
		}
		if newcomerDone == 0 && injected(ctx, b, c, newcomer) {
			newcomerDone = time.Since(began)
		}
		if got := run.count(ctx, b, 0); switchDone == 0 && got.gateways == 0 && got.routed == 0 && got.closed == 0 && got.injected == k.n {
			switchDone = time.Since(began)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if newcomerDone == 0 || switchDone == 0 {
		b.Fatalf("the switch to sidecar did not finish within %v (newcomer done: %v, switch done: %v)\n%s",
			deadline.Sub(began), newcomerDone, switchDone, tail(sidecar.out.String(), 4000))
	}
	b.Run(fmt.Sprintf("switch/ambient-to-sidecar/N=%d", k.n), func(b *testing.B) {
		b.ReportMetric(switchDone.Seconds(), "switch-s")
		b.ReportMetric(switchDone.Seconds()*1000/float64(k.n), "ms/namespace")
		b.ReportMetric(newcomerDone.Seconds(), "newcomer-s")
		b.ReportMetric(newcomerDone.Seconds()/switchDone.Seconds(), "newcomer/switch")
		b.ReportMetric(workersStarted.Seconds(), "workers-s")
	})
}

// createNewcomer hands over a namespace and creates its Profile, as a new user's registration does
// while the switch runs.
func createNewcomer(ctx context.Context, b *testing.B, c client.Client, name string) {
	owner := name + "@example.com"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{ownership.OwnerAnnotation: owner}}},
		&profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: profilev1.ProfileSpec{Owner: fixture.User(owner)}},
	} {
		if err := c.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}

func injected(ctx context.Context, b *testing.B, c client.Client, name string) bool {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		b.Fatal(err)
	}
	return ns.Labels[waypoint.InjectionLabel] == "enabled"
}

// profileWorkersStarted says whether the controller's log says the Profile controller's workers
// started: controller-runtime names a controller after its For kind, lower-cased, and the
// reference controller logs JSON (zap's production encoder).
func profileWorkersStarted(log string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "Starting workers") && strings.Contains(l, `"controller":"profile"`) {
			return true
		}
	}
	return false
}
