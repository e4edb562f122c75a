package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/internal/golden"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/runner/dryrun"
)

// rollout is the prepared cluster of the issue: a healthy namespace, one with kfam's legacy owner
// policy, one running a privileged pod, one whose istio-injection label another writer set.
var rollout = []string{"foreign", "gpu", "healthy", "legacy"}

func prepareRollout(t *testing.T, c client.Client) map[string]*profilev1.Profile {
	t.Helper()
	ctx := context.Background()
	profiles := map[string]*profilev1.Profile{}
	for _, name := range rollout {
		profiles[name] = createProfile(t, c, name)
	}
	require.NoError(t, c.Create(ctx, kfamOwnerPolicy("legacy"), client.FieldOwner("kfam")))
	require.NoError(t, c.Create(ctx, privilegedPod("gpu")))
	labelAs(t, c, "foreign", "kubectl-label", "istio-injection", "enabled")
	return profiles
}

// Issue 16, done when: the plan of the prepared namespaces is golden-tested as text and JSON
// and exits 2; it is read-only; what Apply then does is exactly what was planned; after Apply
// a second plan has nothing to write and exits 0 (waiting for the waypoints, which only istiod
// programs, does not count as attention); once istiod has programmed them the plan shows the
// enrolment labels, and after that apply, nothing at all.
func TestRolloutPlan(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	fixture.Platform(t, c, config.Default())
	profiles := prepareRollout(t, c)
	configPath := writeConfig(t, rolloutConfig)
	opts := options{configPath: configPath, profiles: rollout, parallel: 3}

	rec := &recorder{}
	before := namespaceVersions(t, c)
	text, code := planOutput(t, rec.config(env.Base), opts)
	assert.Equal(t, exitAttention, code)
	golden.Assert(t, "plan/rollout.txt", stable(text))
	assertReadOnly(t, rec)
	assert.Equal(t, before, namespaceVersions(t, c), "the plan changed a namespace")

	opts.output = "json"
	js, code := planOutput(t, env.Base, opts)
	assert.Equal(t, exitAttention, code)
	golden.Assert(t, "plan/rollout.json", stable(js))
	opts.output = "text"

	diffText, _ := planOutput(t, env.Base, options{configPath: configPath, profiles: []string{"legacy"}, diff: true})
	golden.Assert(t, "plan/legacy-diff.txt", stable(diffText))

	planned := decodeReport(t, js)
	applyAndCompare(t, c, configPath, profiles, planned)
	// A switch from sidecars takes more than one apply (the owner policy moves to the waypoint
	// once the ztunnel policy is in place, then the waypoint is made): plan and apply until the
	// plan has nothing more to write.
	for range 3 {
		js, _ = planOutput(t, env.Base, options{configPath: configPath, profiles: rollout, output: "json"})
		next := decodeReport(t, js)
		if !writesAnything(next) {
			break
		}
		applyAndCompare(t, c, configPath, profiles, next)
	}

	text, code = planOutput(t, env.Base, opts)
	assert.Equal(t, exitOK, code, text)
	golden.Assert(t, "plan/after-apply.txt", stable(text))

	for _, name := range rollout {
		programWaypoint(t, c, name)
	}
	text, code = planOutput(t, env.Base, opts)
	assert.Equal(t, exitOK, code, text)
	golden.Assert(t, "plan/waypoints-programmed.txt", stable(text))
	js, _ = planOutput(t, env.Base, options{configPath: configPath, profiles: rollout, output: "json"})
	applyAndCompare(t, c, configPath, profiles, decodeReport(t, js))

	text, code = planOutput(t, env.Base, opts)
	assert.Equal(t, exitOK, code)
	golden.Assert(t, "plan/converged.txt", stable(text))
	js, _ = planOutput(t, env.Base, options{configPath: configPath, profiles: rollout, output: "json"})
	assertSettled(t, decodeReport(t, js), nil)

	// Back to sidecars: the enrolment labels are withdrawn first (phase 0, which re-reads the
	// namespace), then istio-injection changes and the ambient objects are pruned. The dry run
	// must see its own withdrawal to plan what the apply does.
	sidecar := writeConfig(t, rolloutConfig+"mesh:\n  mode: sidecar\n")
	// With the guard rendered again from the new PluginConfig, as docs/migration.md says (the
	// ambient one would be reported GuardStale).
	sidecarCfg, err := loadConfig(sidecar)
	require.NoError(t, err)
	fixture.ApplyGuard(t, c, sidecarCfg)
	text, code = planOutput(t, env.Base, options{configPath: sidecar, profiles: []string{"legacy"}})
	assert.Equal(t, exitOK, code, text)
	golden.Assert(t, "plan/back-to-sidecar.txt", stable(text))
	js, _ = planOutput(t, env.Base, options{configPath: sidecar, profiles: rollout, output: "json"})
	applyAndCompare(t, c, sidecar, profiles, decodeReport(t, js))
	text, code = planOutput(t, env.Base, options{configPath: sidecar, profiles: rollout})
	assert.Equal(t, exitOK, code)
	golden.Assert(t, "plan/sidecar-after-apply.txt", stable(text))
	js, _ = planOutput(t, env.Base, options{configPath: sidecar, profiles: rollout, output: "json"})
	// gpu keeps ambient while its pod runs (the runner's data-plane hold): a wait, by design.
	assertSettled(t, decodeReport(t, js), map[string]bool{"gpu": true})

	assertRevokeDryRun(t, c, sidecar, profiles["healthy"])
}

// assertRevokeDryRun checks Revoke's dry run reports what the real Revoke then does, and
// persists nothing meanwhile.
func assertRevokeDryRun(t *testing.T, c client.Client, configPath string, profile *profilev1.Profile) {
	t.Helper()
	cfg, err := loadConfig(configPath)
	require.NoError(t, err)
	runner, err := plugins.NewRunner(c, cfg)
	require.NoError(t, err)
	before := namespaceVersions(t, c)
	dry, writes := dryrun.Revoke(context.Background(), runner, profile)
	require.NoError(t, dry.Err())
	assert.Equal(t, before, namespaceVersions(t, c), "a dry-run Revoke changed a namespace")
	assert.NotEmpty(t, writes)
	revoked := runner.Revoke(context.Background(), profile)
	assert.Equal(t, comparable(dry), comparable(revoked))
	assert.True(t, dry.Changed())
}

// assertSettled checks a plan after an apply has nothing left to do but what waits (in the
// namespaces of waiting). The owner policy adopted from kfam settles too: kfam's managedFields
// entry keeps only a bare spec node after the adoption, which owns no field.
func assertSettled(t *testing.T, r *Report, waiting map[string]bool) {
	t.Helper()
	for _, n := range r.Namespaces {
		assert.Empty(t, n.Labels, "%s: labels", n.Namespace)
		assert.Equal(t, waiting[n.Namespace], len(n.Waiting) > 0, "%s: waiting %v", n.Namespace, n.Waiting)
		assert.NotEqual(t, statusAttention, n.Status, n.Namespace)
		assert.Empty(t, n.Objects, "%s: objects", n.Namespace)
	}
}

// writesAnything says whether a plan has an object or label to write.
func writesAnything(r *Report) bool {
	for _, n := range r.Namespaces {
		if len(n.Objects) > 0 || len(n.Labels) > 0 {
			return true
		}
	}
	return false
}

// assertReadOnly checks every request was a read or a dry-run write.
func assertReadOnly(t *testing.T, rec *recorder) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.requests)
	dryRuns := 0
	for _, r := range rec.requests {
		if r.method == http.MethodGet {
			continue
		}
		if assert.Equal(t, "All", r.dryRun, "%s %s is a write without dryRun=All", r.method, r.path) {
			dryRuns++
		}
	}
	assert.Positive(t, dryRuns, "the plan sent no dry-run write at all, so it proved nothing")
}

func namespaceVersions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range rollout {
		ns := &corev1.Namespace{}
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: name}, ns))
		out[name] = ns.ResourceVersion
	}
	return out
}

func decodeReport(t *testing.T, js string) *Report {
	t.Helper()
	r := &Report{}
	require.NoError(t, json.Unmarshal([]byte(js), r))
	return r
}

// applyAndCompare dry-runs each Profile with the runner, applies it for real, and checks that
// the real apply reported the same, wrote the same objects and changed the labels the plan listed.
func applyAndCompare(t *testing.T, c client.Client, configPath string, profiles map[string]*profilev1.Profile, planned *Report) {
	t.Helper()
	ctx := context.Background()
	cfg, err := loadConfig(configPath)
	require.NoError(t, err)
	runner, err := plugins.NewRunner(c, cfg)
	require.NoError(t, err)
	for i, name := range rollout {
		p := planned.Namespaces[i]
		require.Equal(t, name, p.Namespace)
		labelsBefore := namespaceLabels(t, c, name)

		dry := newDryRun(dryrun.Apply(ctx, runner, profiles[name]))
		applied := runner.Apply(ctx, profiles[name])

		assert.Equal(t, comparable(dry.Result), comparable(applied), "%s: the dry run and the apply report differently", name)
		assert.Equal(t, withoutDiffs(p.Objects), objectChanges(newDryRun(applied, nil), false), "%s: objects", name)
		assert.Equal(t, p.Labels, appliedLabels(labelsBefore, namespaceLabels(t, c, name), applied), "%s: labels", name)
		assertWrittenAsPlanned(t, c, dry)
	}
}

// comparable is a Result's per-plugin report with errors as text.
func comparable(r *runner.Result) []map[string]any {
	var out []map[string]any
	for _, p := range r.Plugins {
		var errs []string
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		out = append(out, map[string]any{"plugin": p.Plugin, "created": p.Created, "updated": p.Updated, "unchanged": p.Unchanged,
			"deleted": p.Deleted, "set": p.LabelsSet, "removed": p.LabelsRemoved, "waiting": p.Waiting, "warnings": p.Warnings, "errors": errs})
	}
	return out
}

func withoutDiffs(objs []ObjectChange) []ObjectChange {
	out := make([]ObjectChange, len(objs))
	for i, o := range objs {
		o.Diff = ""
		out[i] = o
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func namespaceLabels(t *testing.T, c client.Client, name string) map[string]string {
	t.Helper()
	ns := &corev1.Namespace{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: name}, ns))
	return ns.Labels
}

// appliedLabels is the label diff the real apply made, in the plan's form.
func appliedLabels(before, after map[string]string, applied *runner.Result) []LabelChange {
	res := newDryRun(&runner.Result{Plugins: applied.Plugins}, []dryrun.Write{{
		GVK: corev1.SchemeGroupVersion.WithKind("Namespace"), Name: "ns",
		Before: labelled(before), After: labelled(after),
	}})
	return labelChanges(res)
}

func labelled(l map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetLabels(l)
	return u
}

// assertWrittenAsPlanned checks each object the dry run answered for is now in the cluster
// exactly as answered (server-kept metadata aside).
func assertWrittenAsPlanned(t *testing.T, c client.Client, dry *dryRun) {
	t.Helper()
	for _, w := range dry.DryRun {
		if w.Namespace == "" {
			continue
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(w.GVK)
		err := c.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: w.Name}, live)
		if w.After == nil {
			assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "%s/%s: planned deleted, still there", w.Namespace, w.Ref())
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, cleanYAML(w.After), cleanYAML(live), "%s/%s: written differently than planned", w.Namespace, w.Ref())
	}
}

// The plan of namespaces an apply would not fix: ambient readiness issues of every kind, a
// namespace that is not the Profile's, and a Profile that asks for a looser level than allowed.
func TestPlanReportsReadinessAndRefusals(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	prepareReadiness(t, c)
	opts := options{configPath: writeConfig(t, rolloutConfig), profiles: []string{"badowner", "greedy", "routed", "taken"}}
	text, code := planOutput(t, env.Base, opts)
	assert.Equal(t, exitAttention, code)
	golden.Assert(t, "plan/readiness.txt", stable(text))
}

// A Profile whose namespace the profiles controller has not created yet is waited for, not an
// error: there is nothing to plan there yet.
func TestMissingNamespaceIsWaiting(t *testing.T) {
	env := envtest.Start(t)
	fixture.Platform(t, env.Client, config.Default())
	require.NoError(t, env.Client.Create(context.Background(), &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: "newcomer"},
		Spec: profilev1.ProfileSpec{Owner: fixture.User("newcomer@example.com")}}))
	js, code := planOutput(t, env.Base, options{profiles: []string{"newcomer"}, output: "json"})
	assert.Equal(t, exitOK, code)
	r := decodeReport(t, js)
	require.Len(t, r.Namespaces, 1)
	assert.Equal(t, statusUnchanged, r.Namespaces[0].Status)
	assert.Equal(t, []Finding{{Message: "namespace newcomer does not exist yet: the profiles controller creates it, and the plugins apply then"}},
		r.Namespaces[0].Waiting)
}

// -kubeconfig and -context select the cluster as kubectl does.
func TestKubeconfigAndContext(t *testing.T) {
	env := envtest.Start(t)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Base.Host, CertificateAuthorityData: env.Base.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Base.CertData, ClientKeyData: env.Base.KeyData, Token: env.Base.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "admin"}
	kc.CurrentContext = "elsewhere"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))

	cfg, err := restConfig(path, "envtest")
	require.NoError(t, err)
	assert.Equal(t, env.Base.Host, cfg.Host)
	js, code := planOutput(t, cfg, options{output: "json"}) // every Profile the shared API server has
	assert.NotEqual(t, exitError, code)
	assert.Equal(t, SchemaVersion, decodeReport(t, js).SchemaVersion)

	_, err = restConfig(path, "")
	assert.ErrorContains(t, err, "kubeconfig: invalid configuration", "the current context names a cluster that is not there")
}

func TestFlags(t *testing.T) {
	var errOut bytes.Buffer
	_, err := parseFlags([]string{"-o", "xml"}, &errOut)
	require.Error(t, err)
	assert.Contains(t, errOut.String(), `-o "xml": must be text, json or yaml`)
	o, err := parseFlags([]string{"-o", "yaml"}, &errOut)
	require.NoError(t, err)
	assert.Equal(t, "yaml", o.output)

	o, err = parseFlags([]string{"-profiles", "a, b,,c", "-diff"}, &errOut)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, o.profiles)
	assert.True(t, o.diff)

	assert.Equal(t, 4, o.parallel)

	_, err = parseFlags([]string{"extra"}, &errOut)
	assert.Error(t, err)

	_, err = parseFlags([]string{"-parallel", "0"}, &errOut)
	assert.ErrorContains(t, err, "-parallel 0: must be at least 1")
}

func TestBadConfigExitsOne(t *testing.T) {
	env := envtest.Start(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), env.Base, options{configPath: writeRawConfig(t, "mesh:\n  mode: hybrid\n")}, &out, &errOut)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut.String(), "mesh.mode")
	assert.Empty(t, out.String())
}

func TestUnknownProfileExitsOne(t *testing.T) {
	env := envtest.Start(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), env.Base, options{profiles: []string{"nobody"}}, &out, &errOut)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut.String(), `-profiles: Profile "nobody"`)
}

func TestProgressIsSilentWithoutATerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	require.NoError(t, err)
	defer f.Close()
	p := newProgress(f)
	assert.Nil(t, p)
	p.start(3) // a nil bar is silent, not a panic
	p.step("alice")
	p.done()
	var buf bytes.Buffer
	bar := &progress{w: &buf}
	bar.start(2)
	bar.step("alice")
	assert.Contains(t, buf.String(), "1/2 alice")
}

// Issue 15: the plan shows the platform check's findings first, and they need attention: here
// the notebook controller's namespace still runs sidecars and the ingress gateway has no pods.
// The waypoint class defaults are in istiod's namespace (fixture.Platform), so enforce restricted
// without the per-namespace patch gives no waypoint finding; the library tests cover that one.
func TestPlanReportsPlatform(t *testing.T) {
	env := envtest.Start(t)
	c := env.Client
	body := `podSecurity:
  enforce:
    level: restricted
mesh:
  istiodNamespace: plan-istiod
authorization:
  adoptOwnerPolicy: true
  principals:
    ingressGateway: cluster.local/ns/plan-gateway/sa/gateway
  platformCallers:
  - name: notebook-controller
    principal: cluster.local/ns/plan-kubeflow/sa/notebook-controller-service-account
    methods: [GET]
    paths: ["*/api/kernels"]
`
	cfg := fixture.Config(t, body)
	fixture.Platform(t, c, cfg)
	fixture.ApplyGuard(t, c, cfg) // the API server is shared: the guard may be another test's
	require.NoError(t, c.Delete(context.Background(), fixture.MeshPod("plan-gateway", "gateway-0", "", nil)))
	fixture.Label(t, c, "plan-kubeflow", map[string]*string{"istio.io/dataplane-mode": nil, "istio-injection": ptr.To("enabled")})
	require.NoError(t, c.Delete(context.Background(), fixture.MeshPod("plan-kubeflow", "notebook-controller-service-account-0", "", nil)))
	fixture.Ensure(t, c, fixture.MeshPod("plan-kubeflow", "notebook-controller-1", "notebook-controller-service-account", fixture.SidecarPod))
	createProfile(t, c, "platform-user")

	opts := options{configPath: writeConfig(t, body), profiles: []string{"platform-user"}}
	text, code := planOutput(t, env.Base, opts)
	assert.Equal(t, exitAttention, code)
	golden.Assert(t, "plan/platform.txt", stable(text))
	opts.output = "json"
	js, _ := planOutput(t, env.Base, opts)
	r := decodeReport(t, js)
	require.Len(t, r.Platform, 2)
	assert.Equal(t, platform.FindingDataPlaneMismatch, r.Platform[0].Kind)
	assert.Equal(t, platform.FindingIngressGatewayMissing, r.Platform[1].Kind)
	assert.Equal(t, 2, r.Summary.Platform)
}
