package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istioapi "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// The kustomizations of deploy/, and the stand-ins of testdata/deploy that include its
// components as an admin's Kubeflow kustomization would.
const (
	baseDir       = "deploy/base"
	besideDir     = "deploy/overlays/beside-kubeflow"
	stockDir      = "cmd/profile-plugins-controller/testdata/deploy/stock"
	forkDir       = "cmd/profile-plugins-controller/testdata/deploy/fork"
	mirrorDir     = "cmd/profile-plugins-controller/testdata/deploy/mirror"
	stockPolicy   = "ns-owner-access-istio"
	stockLabelsCM = "profile-plugins-stock-namespace-labels"
)

var (
	kustomizeOnce sync.Once
	kustomizeBin  string
	kustomizeErr  error
)

// kustomize builds the kustomization at dir (relative to the module root) with hack/kustomize
// (krusty, the library behind `kubectl kustomize`), built once per test binary from its own
// module so that this module's go.mod does not gain kustomize.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root := golden.ModuleRoot(t)
	kustomizeOnce.Do(func() {
		tmp, err := os.MkdirTemp("", "kustomize-")
		if err != nil {
			kustomizeErr = err
			return
		}
		kustomizeBin = filepath.Join(tmp, "kustomize")
		cmd := exec.Command("go", "build", "-o", kustomizeBin, ".")
		cmd.Dir = filepath.Join(root, "hack", "kustomize")
		// GOFLAGS may name this module's -modfile (make test-newest), which is not hack/kustomize's.
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			kustomizeErr = errors.New("building hack/kustomize: " + err.Error() + "\n" + string(out))
		}
	})
	require.NoError(t, kustomizeErr)
	var stderr bytes.Buffer
	cmd := exec.Command(kustomizeBin, filepath.Join(root, dir))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kustomize build %s: %s", dir, stderr.String())
	return decodeAll(t, bytes.NewReader(out))
}

// decodeAll decodes every YAML or JSON document of r.
func decodeAll(t *testing.T, r io.Reader) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		objs = append(objs, u)
	}
}

// find is the one object of kind and name in objs.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == kind && (u.GetName() == name || strings.HasPrefix(u.GetName(), name+"-") && kind == "ConfigMap") {
			found = append(found, u)
		}
	}
	require.Len(t, found, 1, "%s %s in the build", kind, name)
	return found[0]
}

func into[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true))
	return out
}

// pluginConfig parses the PluginConfig the build hands the controller.
func pluginConfig(t *testing.T, objs []*unstructured.Unstructured) *config.Config {
	t.Helper()
	cm := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "profile-plugins-config"))
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
	require.NoError(t, err, "the PluginConfig of the build")
	return cfg
}

// The base and the beside-kubeflow overlay build, and run the controller as the admin expects:
// leader election, probes, requests and limits, a pod Pod Security "restricted" admits with a
// read-only root filesystem, the PluginConfig mounted where -config reads it, the image by the
// name `images:` overrides.
func TestDeployBuildsARestrictedControllerDeployment(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{baseDir, besideDir} {
		t.Run(dir, func(t *testing.T) {
			objs := kustomize(t, dir)
			d := into[appsv1.Deployment](t, find(t, objs, "Deployment", "profile-plugins-controller"))
			assert.Equal(t, "kubeflow", d.Namespace)
			spec := d.Spec.Template.Spec
			require.Len(t, spec.Containers, 1)
			c := spec.Containers[0]
			assert.Equal(t, "ghcr.io/kubeflow-ambient/profile-plugins-controller:v0.1.0", c.Image)
			assert.Contains(t, c.Args, "-leader-elect")
			assert.Contains(t, c.Args, "-config=/etc/profile-plugins/config.yaml")
			require.NotNil(t, c.LivenessProbe)
			require.NotNil(t, c.ReadinessProbe)
			assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
			assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				assert.Contains(t, c.Resources.Requests, r)
				assert.Contains(t, c.Resources.Limits, r)
			}
			require.NotNil(t, c.SecurityContext)
			assert.Equal(t, ptrTo(true), c.SecurityContext.ReadOnlyRootFilesystem)
			assert.Equal(t, "profile-plugins", spec.ServiceAccountName)

			eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
			require.NoError(t, err)
			for _, r := range eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &spec) {
				assert.True(t, r.Allowed, "Pod Security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
			}

			cm := find(t, objs, "ConfigMap", "profile-plugins-config")
			require.Len(t, spec.Volumes, 1)
			assert.Equal(t, cm.GetName(), spec.Volumes[0].ConfigMap.Name, "the Deployment mounts the generated PluginConfig")
			pluginConfig(t, objs)

			svc := into[corev1.Service](t, find(t, objs, "Service", "profile-plugins-metrics"))
			assert.Equal(t, d.Spec.Template.Labels["app.kubernetes.io/name"], svc.Spec.Selector["app.kubernetes.io/name"])
			assert.Equal(t, "metrics", svc.Spec.Ports[0].TargetPort.String())
		})
	}
}

// An admin's overlay points the image elsewhere with `images:` alone.
func TestDeployImageIsOverriddenByImages(t *testing.T) {
	t.Parallel()
	d := into[appsv1.Deployment](t, find(t, kustomize(t, mirrorDir), "Deployment", "profile-plugins-controller"))
	assert.Equal(t, "registry.example.com/mirror/profile-plugins-controller:v9.9.9", d.Spec.Template.Spec.Containers[0].Image)
}

// The no-fork PluginConfig keeps the plugins' owner policy apart from the stock controller's and
// never takes it over, and writes contributor policies the waypoint enforces.
func TestBesideKubeflowConfigStaysOffTheStockPolicy(t *testing.T) {
	t.Parallel()
	cfg := pluginConfig(t, kustomize(t, besideDir))
	assert.NotEqual(t, stockPolicy, cfg.Authorization.OwnerPolicyName)
	assert.NotEqual(t, stockPolicy, cfg.Authorization.ZtunnelPolicyName)
	assert.False(t, cfg.Authorization.AdoptOwnerPolicy)
	assert.Equal(t, config.ModeAmbient, cfg.Mesh.Mode)
	assert.Equal(t, config.ContributorsSource("plugin"), cfg.Authorization.Contributors)
}

// stockSetLabels is what the stock profiles controller does with its label file on every
// reconcile (kubeflow/dashboard components/profile-controller, controllers/profile_controller.go,
// setNamespaceLabels): a key with a value is added when missing, a key with "" is deleted.
func stockSetLabels(labels, file map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		out[k] = v
	}
	for k, v := range file {
		_, ok := out[k]
		switch {
		case v == "":
			delete(out, k)
		case !ok:
			out[k] = v
		}
	}
	return out
}

// pluginLabel says whether the plugins own a namespace label key (waypoint and pss).
func pluginLabel(k string) bool {
	return k == "istio-injection" || strings.HasPrefix(k, "istio.io/") || strings.HasPrefix(k, "pod-security.kubernetes.io/")
}

// The stock controller, reading deploy/overlays/beside-kubeflow/namespace-labels.yaml, never adds,
// changes or deletes a label the plugins own, in any state the plugins leave a namespace in
// (routed, or not yet routed because the waypoint is not Programmed); and the component points
// the stock Deployment at the ConfigMap the overlay makes of that file.
func TestStockNamespaceLabelsNeverTouchPluginLabels(t *testing.T) {
	t.Parallel()
	objs := kustomize(t, besideDir)
	cm := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", stockLabelsCM))
	assert.Equal(t, stockLabelsCM, cm.Name, "no hash suffix: the stock Deployment is built elsewhere")
	assert.Equal(t, "kubeflow", cm.Namespace)
	file := map[string]string{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data["namespace-labels.yaml"]), &file))
	require.NotEmpty(t, file)
	for k := range file {
		assert.False(t, pluginLabel(k), "namespace-labels.yaml sets %s, which the plugins own", k)
	}
	onDisk, err := os.ReadFile(filepath.Join(golden.ModuleRoot(t), besideDir, "namespace-labels.yaml"))
	require.NoError(t, err)
	assert.Equal(t, string(onDisk), cm.Data["namespace-labels.yaml"], "the ConfigMap is the file the kfam tests read")

	routed := map[string]string{"istio.io/dataplane-mode": "ambient", "istio.io/use-waypoint": "waypoint",
		"istio-injection": "disabled", "pod-security.kubernetes.io/enforce": "baseline"}
	unrouted := map[string]string{"istio.io/dataplane-mode": "ambient", "istio-injection": "disabled"}
	for name, labels := range map[string]map[string]string{"routed": routed, "not yet routed": unrouted} {
		after := stockSetLabels(labels, file)
		for k, v := range after {
			if pluginLabel(k) {
				assert.Equal(t, labels[k], v, "%s: the stock controller changes %s", name, k)
			}
		}
		for k := range labels {
			assert.Contains(t, after, k, "%s: the stock controller deletes %s", name, k)
		}
	}

	stock := into[appsv1.Deployment](t, find(t, kustomize(t, stockDir), "Deployment", "profiles-deployment"))
	var mounted string
	for _, v := range stock.Spec.Template.Spec.Volumes {
		if v.Name == "namespace-labels" {
			mounted = v.ConfigMap.Name
		}
	}
	assert.Equal(t, stockLabelsCM, mounted, "the component points the stock controller's label file at the overlay's ConfigMap")
}

// The fork component binds only the plugins' ClusterRole, to the fork's ServiceAccount, and hands
// the fork its PluginConfig through -profile-plugins-config.
func TestForkComponentWiresThePluginsIntoTheFork(t *testing.T) {
	t.Parallel()
	objs := kustomize(t, forkDir)
	var roles []string
	for _, u := range objs {
		if strings.HasSuffix(u.GetKind(), "Role") || strings.HasSuffix(u.GetKind(), "RoleBinding") {
			roles = append(roles, u.GetKind()+"/"+u.GetName())
		}
	}
	assert.ElementsMatch(t, []string{"ClusterRole/profile-plugins", "ClusterRoleBinding/profile-plugins"}, roles)
	for _, u := range objs {
		assert.NotEqual(t, "profile-plugins-controller", u.GetName(), "%s: a fork runs no reference controller", u.GetKind())
	}
	crb := find(t, objs, "ClusterRoleBinding", "profile-plugins")
	subjects, _, _ := unstructured.NestedSlice(crb.Object, "subjects")
	require.Len(t, subjects, 1)
	assert.Equal(t, "profiles-controller-service-account", subjects[0].(map[string]any)["name"])
	fork := into[appsv1.Deployment](t, find(t, objs, "Deployment", "profiles-deployment"))
	assert.Contains(t, fork.Spec.Template.Spec.Containers[0].Args, "-profile-plugins-config=/etc/profile-plugins/config.yaml")
	cm := find(t, objs, "ConfigMap", "profile-plugins-config")
	var names []string
	for _, v := range fork.Spec.Template.Spec.Volumes {
		names = append(names, v.ConfigMap.Name)
	}
	assert.Contains(t, names, cm.GetName())
	cfg := pluginConfig(t, objs)
	assert.Equal(t, config.DefaultOwnerPolicyName, cfg.Authorization.OwnerPolicyName, "a fork keeps the stock policy's name: it writes it now")
}

// applyBuild sends every object of a build to the API server: first a server-side dry run of all
// of them (admission, schema, RBAC escalation checks), then, if apply, for real (server-side
// apply, as `kubectl apply --server-side` does). The Deployment is left out of the real apply:
// no kubelet runs here, the test runs the controller itself.
func applyBuild(t *testing.T, c client.Client, objs []*unstructured.Unstructured, apply bool) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow"}})))
	for _, u := range objs {
		require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("kubectl"), client.ForceOwnership, client.DryRunAll),
			"server-side dry run of %s %s", u.GetKind(), u.GetName())
	}
	if !apply {
		return
	}
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			continue
		}
		require.NoError(t, c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("kubectl"), client.ForceOwnership),
			"%s %s", u.GetKind(), u.GetName())
	}
}

// Every build is accepted by a real API server, Deployments included.
func TestDeployBuildsAreAcceptedByTheAPIServer(t *testing.T) {
	env := oneAtATime(t, installServer)
	for _, dir := range []string{baseDir, besideDir, stockDir, forkDir} {
		t.Run(dir, func(t *testing.T) { applyBuild(t, env.Client, kustomize(t, dir), false) })
	}
}

// overlayServiceAccount is the user the build's controller Deployment runs as, its
// ServiceAccount's, and that ServiceAccount's namespace (where its leader-election lease lives),
// both read from the build, so that a test runs the controller as exactly what the overlay
// installs.
func overlayServiceAccount(t *testing.T, objs []*unstructured.Unstructured) (user, namespace string) {
	t.Helper()
	d := into[appsv1.Deployment](t, find(t, objs, "Deployment", "profile-plugins-controller"))
	name := d.Spec.Template.Spec.ServiceAccountName
	require.NotEmpty(t, name, "the Deployment names its ServiceAccount")
	sa := find(t, objs, "ServiceAccount", name)
	require.Equal(t, d.Namespace, sa.GetNamespace(), "the ServiceAccount %s is in the Deployment's namespace", name)
	return "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName(), sa.GetNamespace()
}

// asServiceAccount is a rest config that acts as the ServiceAccount sa, with the groups the API
// server gives a ServiceAccount token, and counts its writes.
func asServiceAccount(env *envtest.Env, sa string, counter *writeCounter) *rest.Config {
	as := rest.CopyConfig(env.Base)
	ns := strings.Split(sa, ":")[2]
	as.Impersonate = rest.ImpersonationConfig{UserName: sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	as.WrapTransport = counter.wrap
	return as
}

// stockStandIn writes what the stock profiles controller writes into a Profile's namespace that
// could meet the plugins: its selector-less owner policy, and its label file applied with an
// Update, as its reconcile does.
func stockStandIn(t *testing.T, c client.Client, ns, owner string, file map[string]string) {
	t.Helper()
	ctx := context.Background()
	pol := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: stockPolicy, Namespace: ns,
		Annotations: map[string]string{"user": owner, "role": "admin"}}}
	pol.Spec.Rules = []*istioapi.Rule{{When: []*istioapi.Condition{{Key: "source.namespace", Values: []string{ns}}}}}
	require.NoError(t, c.Create(ctx, pol, client.FieldOwner("manager")))
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, n))
	n.Labels = stockSetLabels(n.Labels, file)
	require.NoError(t, c.Update(ctx, n, client.FieldOwner("manager")))
}

// settle waits until counter has seen no write for a second.
func settle(t *testing.T, counter *writeCounter) {
	t.Helper()
	require.Eventually(t, func() bool {
		n := counter.count()
		time.Sleep(time.Second)
		return n == counter.count()
	}, 30*time.Second, 10*time.Millisecond, "the controller settles")
}

// besideFile is the stock controller's label file of the beside-kubeflow overlay.
func besideFile(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(golden.ModuleRoot(t), besideDir, "namespace-labels.yaml"))
	require.NoError(t, err)
	file := map[string]string{}
	require.NoError(t, yaml.UnmarshalStrict(data, &file))
	return file
}

// The beside-kubeflow overlay, applied to a real API server, and the controller run as the
// overlay's ServiceAccount with only the RBAC the overlay grants and the PluginConfig it ships:
// a Profile's namespace is protected and routed through its waypoint; the stock controller's
// policy and labels (a stand-in writes them as the stock controller does) stay as they are; once
// settled a resync writes nothing; deleting the Profile revokes everything.
func TestBesideKubeflowControllerConvergesAsItsServiceAccount(t *testing.T) {
	env := oneAtATime(t, installServer)
	admin := env.Client
	objs := kustomize(t, besideDir)
	applyBuild(t, admin, objs, true)
	cfg := pluginConfig(t, objs)
	counter := &writeCounter{}
	sa, saNamespace := overlayServiceAccount(t, objs)
	as := asServiceAccount(env, sa, counter)
	limited, err := client.New(as, client.Options{Scheme: envtest.NewScheme()})
	require.NoError(t, err)
	require.True(t, apierrors.IsForbidden(limited.List(context.Background(), &corev1.SecretList{})), "RBAC binds the ServiceAccount to the overlay's roles only")

	const ns, owner = "beside-frank", "frank@example.com"
	ctx := startManager(t, as, ctrl.Options{HealthProbeBindAddress: "0", LeaderElection: true,
		LeaderElectionID: "profile-plugins-beside-test", LeaderElectionNamespace: saNamespace}, cfg, only(nil, ns))
	h := &harness{t: t, env: env}
	createProfile(t, admin, ns, owner)
	labelled := func(key, value string) func() bool {
		return func() bool {
			n := &corev1.Namespace{}
			return admin.Get(ctx, client.ObjectKey{Name: ns}, n) == nil && n.Labels[key] == value
		}
	}
	require.Eventually(t, labelled("istio.io/dataplane-mode", "ambient"), 30*time.Second, 100*time.Millisecond)
	stockStandIn(t, admin, ns, owner, besideFile(t))
	require.Eventually(t, func() bool { return h.exists(&gatewayv1.Gateway{}, ns, "waypoint") }, 30*time.Second, 100*time.Millisecond)
	h.programWaypoint(ns)
	require.Eventually(t, labelled("istio.io/use-waypoint", "waypoint"), 30*time.Second, 100*time.Millisecond)
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, cfg.Authorization.OwnerPolicyName), "the plugins' owner policy, under its own name")
	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, cfg.Authorization.ZtunnelPolicyName))

	settle(t, counter)
	stock := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: stockPolicy}, stock))
	stockRV := stock.ResourceVersion
	before, labelsBefore := counter.count(), h.labels(ns)
	// The stock controller's next reconcile: its file changes nothing now.
	assert.Equal(t, labelsBefore, stockSetLabels(labelsBefore, besideFile(t)), "the stock controller would write nothing")
	p := h.profile(ns)
	p.Annotations = map[string]string{"touched": "yes"}
	require.NoError(t, admin.Update(ctx, p))
	time.Sleep(2 * time.Second)
	assert.Equal(t, before, counter.count(), "a resync writes nothing: %v", counter.writes)
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: stockPolicy}, stock))
	assert.Equal(t, stockRV, stock.ResourceVersion, "the stock controller's policy is left alone")
	for k, v := range besideFile(t) {
		assert.Equal(t, v, h.labels(ns)[k], "the stock controller's label %s stays", k)
	}

	require.NoError(t, admin.Delete(ctx, h.profile(ns)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: ns}, &profilev1.Profile{}))
	}, 30*time.Second, 100*time.Millisecond, "the finalizer revokes and lets the Profile go")
	assert.False(t, labelled("istio.io/dataplane-mode", "ambient")(), "enrolment withdrawn")
}

// withMode is the overlay's PluginConfig with mesh.mode changed, as an admin edits the file.
func withMode(t *testing.T, objs []*unstructured.Unstructured, mode config.MeshMode) *config.Config {
	t.Helper()
	cm := into[corev1.ConfigMap](t, find(t, objs, "ConfigMap", "profile-plugins-config"))
	text := cm.Data["config.yaml"]
	require.Contains(t, text, "  mode: ambient\n")
	cfg, err := config.Parse([]byte(strings.Replace(text, "  mode: ambient\n", "  mode: "+string(mode)+"\n", 1)))
	require.NoError(t, err)
	return cfg
}

// openness samples a namespace until stop and records every state that fails open: a routing
// label without a Programmed waypoint, ambient without the ztunnel policy, or no ALLOW policy at
// all in a namespace in a mesh.
func openness(t *testing.T, c client.Client, ns string, cfg *config.Config) (stop func() []string) {
	t.Helper()
	var (
		mu    sync.Mutex
		found []string
		done  = make(chan struct{})
		ended = make(chan struct{})
	)
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if bad := failsOpen(c, ns, cfg); bad != "" {
				mu.Lock()
				found = append(found, bad)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		close(done)
		<-ended
		mu.Lock()
		defer mu.Unlock()
		return found
	}
}

// failsOpen says how namespace ns fails open now, or "".
func failsOpen(c client.Client, ns string, cfg *config.Config) string {
	ctx := context.Background()
	n := &corev1.Namespace{}
	if c.Get(ctx, client.ObjectKey{Name: ns}, n) != nil {
		return ""
	}
	if wp := n.Labels["istio.io/use-waypoint"]; wp != "" {
		gw := &gatewayv1.Gateway{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wp}, gw); err != nil || !programmed(gw) {
			return "istio.io/use-waypoint without a Programmed waypoint"
		}
	}
	if n.Labels["istio.io/dataplane-mode"] == "ambient" &&
		c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cfg.Authorization.ZtunnelPolicyName}, &istiosecurityv1.AuthorizationPolicy{}) != nil {
		return "ambient without the ztunnel policy"
	}
	policies := &istiosecurityv1.AuthorizationPolicyList{}
	if c.List(ctx, policies, client.InNamespace(ns)) == nil && len(policies.Items) == 0 {
		return "no ALLOW policy"
	}
	return ""
}

func programmed(gw *gatewayv1.Gateway) bool {
	for _, c := range gw.Status.Conditions {
		if c.Type == "Programmed" && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gw.Generation {
			return true
		}
	}
	return false
}

// The uninstall of docs/install.md, step by step, on a real API server with the controller run as
// the overlay's ServiceAccount: back to sidecars, stop, release the finalizer, delete the
// plugins' owner policy, delete the overlay. The namespace never fails open on the way, the stock
// controller's policy stays, and a Profile deleted afterwards is not kept by the plugins.
func TestUninstallInOrderNeverFailsOpen(t *testing.T) {
	env := oneAtATime(t, installServer)
	admin := env.Client
	ctx := context.Background()
	objs := kustomize(t, besideDir)
	applyBuild(t, admin, objs, true)
	cfg := pluginConfig(t, objs)
	sa, saNamespace := overlayServiceAccount(t, objs)
	as := asServiceAccount(env, sa, &writeCounter{})
	opts := ctrl.Options{HealthProbeBindAddress: "0", LeaderElection: true, LeaderElectionReleaseOnCancel: true,
		LeaderElectionID: "profile-plugins-uninstall-test", LeaderElectionNamespace: saNamespace}
	h := &harness{t: t, env: env}
	const ns, owner = "uninstall-gina", "gina@example.com"

	_, stop := runManager(t, as, opts, cfg, only(nil, ns))
	createProfile(t, admin, ns, owner)
	require.Eventually(t, func() bool { return h.exists(&gatewayv1.Gateway{}, ns, "waypoint") }, 30*time.Second, 100*time.Millisecond)
	stockStandIn(t, admin, ns, owner, besideFile(t))
	h.programWaypoint(ns)
	require.Eventually(t, func() bool { return h.labels(ns)["istio.io/use-waypoint"] == "waypoint" }, 30*time.Second, 100*time.Millisecond)
	stop()

	// 1. mesh.mode: sidecar, and the controller restarted with it.
	sampled := openness(t, admin, ns, cfg)
	sidecar := withMode(t, objs, config.ModeSidecar)
	_, stop = runManager(t, as, opts, sidecar, only(nil, ns))
	require.Eventually(t, func() bool {
		l := h.labels(ns)
		c := h.profile(ns).Status.Conditions
		return l["istio-injection"] == "enabled" && l["istio.io/dataplane-mode"] == "" && l["istio.io/use-waypoint"] == "" &&
			len(c) == 1 && c[0].Status == "True" && !h.exists(&gatewayv1.Gateway{}, ns, "waypoint")
	}, 30*time.Second, 100*time.Millisecond, "back to sidecars: injection on, ambient and routing off, the waypoint gone")
	ownerPolicy := &istiosecurityv1.AuthorizationPolicy{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: cfg.Authorization.OwnerPolicyName}, ownerPolicy))
	assert.Empty(t, ownerPolicy.Spec.TargetRefs, "the owner policy applies at every sidecar")

	// 2. The controller stopped (scaled to 0).
	stop()
	// 3. The finalizer released, as `jq ... | kubectl replace` does: an update at the read version.
	p := h.profile(ns)
	require.Contains(t, p.Finalizers, Finalizer)
	p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == Finalizer })
	require.NoError(t, admin.Update(ctx, p))
	// 4. The plugins' owner policies deleted by name.
	require.NoError(t, admin.DeleteAllOf(ctx, &istiosecurityv1.AuthorizationPolicy{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": cfg.Authorization.OwnerPolicyName}))
	// 6. The overlay deleted (step 5, the stock component, concerns the stock Deployment only).
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			require.NoError(t, client.IgnoreNotFound(admin.Delete(ctx, u.DeepCopy())), "%s %s", u.GetKind(), u.GetName())
		}
	}
	time.Sleep(500 * time.Millisecond)
	assert.Empty(t, sampled(), "the namespace never failed open")

	assert.True(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, stockPolicy), "the stock controller's policy stays")
	assert.False(t, h.exists(&istiosecurityv1.AuthorizationPolicy{}, ns, cfg.Authorization.OwnerPolicyName))
	assert.Equal(t, "", failsOpen(admin, ns, cfg))
	require.NoError(t, admin.Delete(ctx, h.profile(ns)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: ns}, &profilev1.Profile{}))
	}, 10*time.Second, 100*time.Millisecond, "no finalizer of the plugins keeps the Profile")
}
