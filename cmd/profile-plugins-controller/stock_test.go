package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// The coexistence test's inputs, from the environment (`make test-stock` passes them on).
const (
	// dashboardVar names a checkout of kubeflow/dashboard; without it the test is skipped.
	dashboardVar = "DASHBOARD"
	// pluginConfigVar names the PluginConfig to run the reference controller with (default: the
	// no-fork overlay's, deploy/overlays/beside-kubeflow/plugin-config.yaml, as its build hands it
	// to the controller).
	pluginConfigVar = "PLUGIN_CONFIG"
	// namespaceLabelsVar names the stock controller's namespace-labels file (default: the one the
	// no-fork overlay makes the stock controller read, deploy/overlays/beside-kubeflow/namespace-labels.yaml).
	namespaceLabelsVar = "STOCK_NAMESPACE_LABELS"
)

// kfamAddr is where kfam listens: main.go hard-codes ":8081".
const kfamAddr = "127.0.0.1:8081"

// stockFinalizer is the stock controller's finalizer (controllers/profile_controller.go, PROFILEFINALIZER).
const stockFinalizer = "profile-finalizer"

// dashboardCheckout is the checkout the test builds from, or a skip that says loudly what did not run.
func dashboardCheckout(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(dashboardVar)
	if dir == "" {
		msg := "NOT RUN: " + dashboardVar + " is not set, so the stock profiles controller and kfam were not built and " +
			"their coexistence with the plugins is untested here; run `make test-stock DASHBOARD=/path/to/kubeflow/dashboard`"
		fmt.Fprintln(os.Stderr, "=== "+t.Name()+": "+msg)
		t.Skip(msg)
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	return abs
}

// buildComponent builds one Go component of the checkout with the module proxy, as its Dockerfile
// does (go build in components/<name>), into a temporary directory.
func buildComponent(t *testing.T, checkout, component string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), component)
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(checkout, "components", component)
	// Their own go.mod, not a modfile this module's make targets may pass down.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-buildvcs=false")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "building %s from %s:\n%s", component, cmd.Dir, output)
	return out
}

// process is a program of the checkout running against the test API server.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan error
	// exit is how it ended (a signal, after stop), for the log of a failed test.
	exit error
}

// syncBuffer is the process's output, read while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startProcess(t *testing.T, name, bin, kubeconfig string, args ...string) *process {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start(), "starting %s", name)
	p := &process{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s (%v), its output:\n%s", name, p.exit, lastLines(out.String(), 60))
		}
	})
	return p
}

// stop ends the process as the kubelet would (SIGTERM, then SIGKILL); calling it again is harmless.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case p.exit = <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		p.exit = <-p.done
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stockSide is the unmodified stock profiles controller and kfam, as Kubeflow's manifests run
// them (-userid-header kubeflow-userid -userid-prefix "").
type stockSide struct {
	manager, kfam  string // binaries
	kubeconfig     string
	labels         string
	controller     *process
	accessManagers *process
}

func (s *stockSide) startController(t *testing.T) {
	t.Helper()
	s.controller = startProcess(t, "the stock profiles controller", s.manager, s.kubeconfig,
		"-metrics-bind-address", "0", "-health-probe-bind-address", "0",
		"-userid-header", "kubeflow-userid", "-userid-prefix", "", "-namespace-labels-path", s.labels)
}

func (s *stockSide) startKfam(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", kfamAddr)
	require.NoError(t, err, "kfam always listens on :8081 (its main.go), which is taken here")
	require.NoError(t, l.Close())
	s.accessManagers = startProcess(t, "kfam", s.kfam, s.kubeconfig, "-userid-header", "kubeflow-userid", "-userid-prefix", "")
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + kfamAddr + "/kfam/")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 200*time.Millisecond, "kfam answers")
}

// kfamBinding asks kfam, as the dashboard does, to add (POST) or remove (DELETE) user as an
// editor of ns on behalf of by, and returns kfam's answer.
func kfamBinding(method, by, ns, user string) (int, string, error) {
	body, err := json.Marshal(map[string]any{
		"user":              map[string]string{"kind": rbacv1.UserKind, "name": user},
		"referredNamespace": ns,
		"RoleRef":           map[string]string{"kind": "ClusterRole", "name": authz.RoleEdit},
	})
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequest(method, "http://"+kfamAddr+"/kfam/v1/bindings", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("kubeflow-userid", by)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var msg bytes.Buffer
	_, _ = msg.ReadFrom(resp.Body)
	return resp.StatusCode, msg.String(), nil
}

// kfamAtOnce sends one kfam request per user at once and returns every answer that is not 200.
func kfamAtOnce(method, by, ns string, users []string) []string {
	var (
		mu     sync.Mutex
		failed []string
		wg     sync.WaitGroup
	)
	for _, u := range users {
		wg.Go(func() {
			code, msg, err := kfamBinding(method, by, ns, u)
			if err != nil || code != http.StatusOK {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s %s: %d %s %v", method, u, code, msg, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	sort.Strings(failed)
	return failed
}

// versions are the resourceVersions of the Profile, its namespace and every object either side
// writes there: equal snapshots mean nobody wrote anything in between.
func versions(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, o := range []client.Object{&profilev1.Profile{}, &corev1.Namespace{}} {
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, o); err == nil {
			out[fmt.Sprintf("%T/%s", o, ns)] = o.GetResourceVersion()
		}
	}
	for _, l := range []client.ObjectList{&istiosecurityv1.AuthorizationPolicyList{}, &rbacv1.RoleBindingList{},
		&corev1.ServiceAccountList{}, &gatewayv1.GatewayList{}, &corev1.ConfigMapList{}, &corev1.ResourceQuotaList{}} {
		require.NoError(t, c.List(ctx, l, client.InNamespace(ns)))
		items, err := metaItems(l)
		require.NoError(t, err)
		for _, o := range items {
			out[fmt.Sprintf("%T/%s", l, o.GetName())] = o.GetResourceVersion()
		}
	}
	return out
}

func metaItems(l client.ObjectList) ([]client.Object, error) {
	objs, err := apimeta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("%T is not an object", o)
		}
		out = append(out, co)
	}
	return out, nil
}

// settleWindow is how long nothing may be written for the namespace to count as settled.
const settleWindow = 20 * time.Second

// settled waits until two snapshots settleWindow apart are equal (both sides converged), then
// checks that nothing is rewritten over one more window, and returns the snapshot.
func settled(t *testing.T, c client.Client, ns, after string) map[string]string {
	t.Helper()
	var last map[string]string
	converged := false
	for range 15 {
		now := versions(t, c, ns)
		if last != nil && assert.ObjectsAreEqual(last, now) {
			converged = true
			break
		}
		last = now
		time.Sleep(settleWindow)
	}
	require.True(t, converged, "%s: %s never settled; last snapshot %v", after, ns, last)
	time.Sleep(settleWindow)
	again := versions(t, c, ns)
	assert.Equal(t, last, again, "%s: once settled, neither controller rewrites anything", after)
	return again
}

// The plugins beside the unmodified stock profiles controller and kfam, built from a checkout of
// kubeflow/dashboard: Profile create, edit and delete, contributors added and removed through
// kfam's HTTP API at once, and a restart of either controller. Both sides reach their state,
// neither rewrites anything once settled, kfam answers every request with success, and deleting
// the Profile completes both finalizers.
func TestBesideTheStockProfilesController(t *testing.T) {
	checkout := dashboardCheckout(t)
	if rev, err := exec.Command("git", "-C", checkout, "rev-parse", "HEAD").Output(); err == nil {
		t.Logf("kubeflow/dashboard at %s", strings.TrimSpace(string(rev)))
	}
	// What an admin installs: the no-fork overlay's build, its PluginConfig and the stock label
	// file it ships, unless the environment names others.
	objs := kustomize(t, besideDir)
	cfg, cfgPath := pluginConfig(t, objs), filepath.Join(besideDir, "plugin-config.yaml")
	if p := os.Getenv(pluginConfigVar); p != "" {
		var err error
		cfg, err = config.Load(p)
		require.NoError(t, err, "the PluginConfig %s", p)
		cfgPath = p
	}
	stock := &stockSide{labels: os.Getenv(namespaceLabelsVar)}
	if stock.labels == "" {
		stock.labels = filepath.Join(golden.ModuleRoot(t), besideDir, "namespace-labels.yaml")
	}
	t.Logf("PluginConfig %s, stock namespace labels %s", cfgPath, stock.labels)
	stock.manager = buildComponent(t, checkout, "profile-controller")
	stock.kfam = buildComponent(t, checkout, "access-management")

	// A server of the test's own with the checkout's Profile CRD, which serves v1beta1 too: kfam
	// reads Profiles in v1beta1.
	env := envtest.StartFresh(t, 0)
	_, err := crenvtest.InstallCRDs(env.Base, crenvtest.CRDInstallOptions{ErrorIfPathMissing: true,
		Paths: []string{filepath.Join(checkout, "components/profile-controller/manifests/kustomize/base/crd/kubeflow.org_profiles.yaml")}})
	require.NoError(t, err)
	stock.kubeconfig = env.Kubeconfig(t)
	c := env.Client
	h := &harness{t: t, env: env}

	// The reference controller as the overlay runs it: as its ServiceAccount, bound only to the
	// RBAC the overlay grants (applied here, with the rest of the build but the Deployment), with
	// leader election in its namespace. The stock side runs as the API server's admin: its
	// manifests bind it to cluster-admin (profiles-cluster-rolebinding).
	applyBuild(t, c, objs, true)
	sa, saNamespace := overlayServiceAccount(t, objs)
	t.Logf("the reference controller runs as %s", sa)
	as := asServiceAccount(env, sa, &writeCounter{})
	limited, err := client.New(as, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	require.True(t, apierrors.IsForbidden(limited.List(context.Background(), &corev1.SecretList{})), "%s has only the overlay's RBAC", sa)
	ours := ctrl.Options{LeaderElection: true, LeaderElectionID: defaultLeaderElectionID,
		LeaderElectionNamespace: saNamespace, LeaderElectionReleaseOnCancel: true}

	stock.startController(t)
	stock.startKfam(t)
	_, stopOurs := runManager(t, as, ours, cfg, nil)
	defer func() { stopOurs() }()

	// Create.
	const ns, owner = "stock-alice", "alice@example.com"
	createProfile(t, c, ns, owner)
	h.waitForProtection(ns, cfg)
	stockPolicy := &istiosecurityv1.AuthorizationPolicy{}
	require.Eventually(t, func() bool { return h.exists(stockPolicy, ns, "ns-owner-access-istio") }, 60*time.Second, 200*time.Millisecond,
		"the stock controller writes its own owner policy")
	assert.Empty(t, stockPolicy.Labels["app.kubernetes.io/managed-by"], "the stock controller's policy is not the plugins'")
	require.Eventually(t, func() bool {
		p := h.profile(ns)
		return containsAll(p.Finalizers, stockFinalizer, Finalizer)
	}, 60*time.Second, 200*time.Millisecond, "both controllers hold the Profile with their finalizers")
	settled(t, c, ns, "after create")

	// Edit: a quota (the stock controller's) and a label on the Profile.
	p := h.profile(ns)
	p.Spec.ResourceQuotaSpec.Hard = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	p.Labels = map[string]string{"team": "ml"}
	require.NoError(t, c.Update(context.Background(), p))
	require.Eventually(t, func() bool { return h.exists(&corev1.ResourceQuota{}, ns, "kf-resource-quota") }, 60*time.Second, 200*time.Millisecond)
	h.waitForProtection(ns, cfg)
	settled(t, c, ns, "after an edit")

	// Contributors through kfam's HTTP API, at once.
	var users []string
	for i := range 20 {
		users = append(users, fmt.Sprintf("stock-contributor-%02d@example.com", i))
	}
	assert.Empty(t, kfamAtOnce(http.MethodPost, owner, ns, users), "kfam answers every add with success")
	for _, u := range users {
		h.waitForContributor(ns, u)
	}
	assert.Empty(t, kfamAtOnce(http.MethodDelete, owner, ns, users[:10]), "kfam answers every removal with success")
	for _, u := range users[:10] {
		h.waitForNoPolicy(ns, u)
		assert.False(t, h.exists(&rbacv1.RoleBinding{}, ns, authz.ContributorPolicyName(u, authz.RoleEdit)), u)
	}
	before := settled(t, c, ns, "after contributors were added and removed")

	// Restart the stock controller, then ours: their start-up reconciles write nothing.
	stock.controller.stop(t)
	stock.startController(t)
	assert.Equal(t, before, settled(t, c, ns, "after the stock controller restarted"), "the stock controller's restart rewrote something")
	stopOurs()
	_, stopOurs = runManager(t, as, ours, cfg, nil)
	assert.Equal(t, before, settled(t, c, ns, "after the reference controller restarted"), "the reference controller's restart rewrote something")

	// Delete: both finalizers complete.
	require.NoError(t, c.Delete(context.Background(), h.profile(ns)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKey{Name: ns}, &profilev1.Profile{}))
	}, 120*time.Second, 500*time.Millisecond, "both finalizers complete and the Profile goes")
}

// waitForProtection waits until the reference controller protects ns in ambient mode: its owner
// policy (under cfg's name) on the waypoint, the ztunnel policy, the namespace in ambient and
// routed through a Programmed waypoint, as istiod would report it.
func (h *harness) waitForProtection(ns string, cfg *config.Config) {
	h.t.Helper()
	require.Eventually(h.t, func() bool {
		return h.exists(&gatewayv1.Gateway{}, ns, cfg.Mesh.Waypoint.Name)
	}, 60*time.Second, 200*time.Millisecond, "the waypoint is written")
	require.Eventually(h.t, func() bool {
		gw := &gatewayv1.Gateway{}
		if !h.exists(gw, ns, cfg.Mesh.Waypoint.Name) {
			return false
		}
		if !programmedAt(gw) {
			h.programWaypoint(ns)
		}
		owner := &istiosecurityv1.AuthorizationPolicy{}
		labels := h.namespace(ns).Labels
		return h.exists(owner, ns, cfg.Authorization.OwnerPolicyName) && len(owner.Spec.TargetRefs) == 1 &&
			h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, cfg.Authorization.ZtunnelPolicyName) &&
			labels["istio.io/dataplane-mode"] == "ambient" && labels["istio.io/use-waypoint"] == cfg.Mesh.Waypoint.Name
	}, 90*time.Second, 500*time.Millisecond, "the plugins protect %s", ns)
}

func programmedAt(gw *gatewayv1.Gateway) bool {
	for _, c := range gw.Status.Conditions {
		if c.Type == "Programmed" && c.Status == "True" && c.ObservedGeneration == gw.Generation {
			return true
		}
	}
	return false
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}
