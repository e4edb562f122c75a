package runner_test

// These tests wire the runner as cmd/profile-plugins-controller does: a Reader that caches ConfigMaps and
// Gateways only when they carry the plugins' label (a cache.ByObject label selector), keeps of
// each ConfigMap only what plugin.TrimConfigMap keeps, and holds no Pods, and an APIReader (a
// manager's GetAPIReader()) that the tests watch.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// selectedWiring, while set, makes every mesh runner read as cmd/profile-plugins-controller's does (see
// wireReads): the selected kinds through a label-selected Reader, pods only through the APIReader.
var selectedWiring bool

func (m *mesh) wireReads() {
	if !selectedWiring {
		return
	}
	m.runner.Reader = selectedReader{Reader: m.c, t: m.t, hides: cachedWithSelector}
	m.runner.APIReader = recordingReader{Reader: m.c, reads: &m.apiReads}
	m.runner.FullyCached = []schema.GroupKind{istioPolicyGK} // selectedReader shows every policy
	m.runner.Trimmed = []schema.GroupKind{configMapGK}       // and trims ConfigMaps
}

var istioPolicyGK = istiosecurityv1.SchemeGroupVersion.WithKind("AuthorizationPolicy").GroupKind()

// cachedWithSelector are the kinds cmd/profile-plugins-controller caches with the managed-by selector.
func cachedWithSelector(obj runtime.Object) bool {
	switch obj.(type) {
	case *corev1.ConfigMap, *corev1.ConfigMapList, *gatewayv1.Gateway, *gatewayv1.GatewayList:
		return true
	}
	return false
}

// selectedReader is a cache with a label selector on the kinds hides names: it shows their objects
// only when they carry plugin.ManagedSelector's label, and ConfigMaps only as plugin.TrimConfigMap
// leaves them (runner.CacheByObject's transform). It holds no Pods: reading one fails the test.
type selectedReader struct {
	client.Reader
	t     *testing.T
	hides func(runtime.Object) bool
}

func (s selectedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, pod := obj.(*corev1.Pod); pod {
		s.t.Errorf("pod %s read through the Reader: that starts a cluster-wide Pod informer", key)
	}
	if err := s.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if s.hides(obj) && !plugin.ManagedSelector().Matches(labels.Set(obj.GetLabels())) {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		trimmed, err := plugin.TrimConfigMap(cm)
		require.NoError(s.t, err)
		*cm = *trimmed.(*corev1.ConfigMap)
	}
	return nil
}

func (s selectedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, pods := list.(*corev1.PodList); pods {
		s.t.Errorf("pods listed through the Reader: that starts a cluster-wide Pod informer")
	}
	if err := s.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	var kept []runtime.Object
	for _, it := range items {
		if s.hides(list) && !plugin.ManagedSelector().Matches(labels.Set(it.(client.Object).GetLabels())) {
			continue
		}
		if cm, ok := it.(*corev1.ConfigMap); ok {
			trimmed, err := plugin.TrimConfigMap(cm)
			require.NoError(s.t, err)
			it = trimmed.(*corev1.ConfigMap)
		}
		kept = append(kept, it)
	}
	return meta.SetList(list, kept)
}

// recordingReader reads through to the API server and records each read as "get Kind/name" or
// "list Kind".
type recordingReader struct {
	client.Reader
	reads *[]string
}

func (r recordingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	*r.reads = append(*r.reads, fmt.Sprintf("get %T/%s", obj, key.Name))
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r recordingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	*r.reads = append(*r.reads, fmt.Sprintf("list %T", list))
	return r.Reader.List(ctx, list, opts...)
}

const listPods = "list *v1.PodList"

// labelNamespace sets labels on the namespace as another writer (an admin, an earlier mesh) would.
func (m *mesh) labelNamespace(labels map[string]string) {
	m.t.Helper()
	n := &corev1.Namespace{}
	require.NoError(m.t, m.c.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	require.NoError(m.t, m.c.Update(context.Background(), n, client.FieldOwner("kubectl-label")))
}

// Every scenario of the safety model and the transitions holds as well when the runner reads
// through a label-selected cache and lists pods only when a decision needs them. The one scenario
// left out reports opted-out pods in a namespace at rest, which lists no pods by design (see
// TestOptedOutPodsAreReportedWhileTheNamespaceChanges).
func TestMeshScenariosWithASelectedCacheAndAnAPIReader(t *testing.T) {
	selectedWiring = true
	defer func() { selectedWiring = false }()
	for name, scenario := range map[string]func(*testing.T){
		"FailedPluginKeepsEnrolment":                                 TestFailedPluginKeepsEnrolment,
		"InvalidOwnerKeepsProtectionAndAdmitsNoUser":                 TestInvalidOwnerKeepsProtectionAndAdmitsNoUser,
		"FailedPluginsDamagedObjectDoesNotKeepRouting":               TestFailedPluginsDamagedObjectDoesNotKeepRouting,
		"LegacyOwnerPolicyBlocksUseWaypoint":                         TestLegacyOwnerPolicyBlocksUseWaypoint,
		"ReplacedOwnerPolicyWithdrawsUseWaypoint":                    TestReplacedOwnerPolicyWithdrawsUseWaypoint,
		"UnrelatedConflictKeepsEnrolment":                            TestUnrelatedConflictKeepsEnrolment,
		"ConflictOnTheZtunnelName":                                   TestConflictOnTheZtunnelName,
		"FailedRecreateOfADeletedZtunnelPolicy":                      TestFailedRecreateOfADeletedZtunnelPolicy,
		"FailedRecreateWithoutPodsUnenrols":                          TestFailedRecreateWithoutPodsUnenrols,
		"FailedUpdateOfAStandingPolicyKeepsLabels":                   TestFailedUpdateOfAStandingPolicyKeepsLabels,
		"DriftOfTheZtunnelPolicyIsRestoredAndReported":               TestDriftOfTheZtunnelPolicyIsRestoredAndReported,
		"ForcedApplyOfAnotherManagerIsRestored":                      TestForcedApplyOfAnotherManagerIsRestored,
		"FailedRestoreWithdrawsRouting":                              TestFailedRestoreWithdrawsRouting,
		"RestoreUsesAResourceVersionPrecondition":                    TestRestoreUsesAResourceVersionPrecondition,
		"DriftOfTheWaypointIsRestored":                               TestDriftOfTheWaypointIsRestored,
		"ForeignAmbientLabelWithoutZtunnelPolicyIsReported":          TestForeignAmbientLabelWithoutZtunnelPolicyIsReported,
		"RevokeKeepsPodsCovered":                                     TestRevokeKeepsPodsCovered,
		"RevokeDoesNotWaitWhereNoPodDependsOnAmbient":                TestRevokeDoesNotWaitWhereNoPodDependsOnAmbient,
		"SidecarSwitchWaitsForPods":                                  TestSidecarSwitchWaitsForPods,
		"FieldsOfARestoreGoWhenThePluginStopsSettingThem":            TestFieldsOfARestoreGoWhenThePluginStopsSettingThem,
		"RestoredButNotReownedKeepsLabels":                           TestRestoredButNotReownedKeepsLabels,
		"FailedAdoptionWithholdsUseWaypoint":                         TestFailedAdoptionWithholdsUseWaypoint,
		"AdoptionRestoredButNotReowned":                              TestAdoptionRestoredButNotReowned,
		"ReadOnlyKindsAreNeverPruned":                                TestReadOnlyKindsAreNeverPruned,
		"RevokeDeletesNothingWhileItsLabelsCouldNotBeTakenOff":       TestRevokeDeletesNothingWhileItsLabelsCouldNotBeTakenOff,
		"FailedWithdrawalLeavesThePoliciesTheLabelRoutesTo":          TestFailedWithdrawalLeavesThePoliciesTheLabelRoutesTo,
		"FailedUnlabellingInRevokeKeepsThePolicies":                  TestFailedUnlabellingInRevokeKeepsThePolicies,
		"SidecarToAmbientKeepsSidecarPodsProtected":                  TestSidecarToAmbientKeepsSidecarPodsProtected,
		"SidecarToAmbientWithoutZtunnelPolicyKeepsInjectionAndOwner": TestSidecarToAmbientWithoutZtunnelPolicyKeepsInjectionAndTheOwnerPolicy,
		"FirstAmbientRolloutKeepsSidecarPodsProtected":               TestFirstAmbientRolloutKeepsSidecarPodsProtected,
		"SidecarToAmbientConvergesInOrder":                           TestSidecarToAmbientConvergesInOrder,
		"OwnerPolicyStaysOnTheWaypointWhenTheZtunnelPolicyGoes":      TestOwnerPolicyStaysOnTheWaypointWhenTheZtunnelPolicyGoes,
		"SidecarToAmbientWithARevisionKeepsInjection":                TestSidecarToAmbientWithARevisionKeepsInjection,
		"SwitchToModeNoneKeepsTheOwnerPolicyWhileSidecarsRun":        TestSwitchToModeNoneKeepsTheOwnerPolicyWhileSidecarsRun,
		"RevokeKeepsTheOwnerPolicyWhileSidecarsRun":                  TestRevokeKeepsTheOwnerPolicyWhileSidecarsRun,
		"OwnerPolicyHeldForSidecarsGoesWithThem":                     TestOwnerPolicyHeldForSidecarsGoesWithThem,
		"NoWaypointWithoutItsOwnerPolicy":                            TestNoWaypointWithoutItsOwnerPolicy,
		"WaypointIsCreatedOnlyAfterItsOwnerPolicy":                   TestWaypointIsCreatedOnlyAfterItsOwnerPolicy,
		"ReplacedOwnerPolicyRemovesTheWaypoint":                      TestReplacedOwnerPolicyRemovesTheWaypoint,
		"WaypointPodsAreNotReportedAsOptedOutOrSidecarPods":          TestWaypointPodsAreNotReportedAsOptedOutOrSidecarPods,
		"DetachedOwnerPolicyIsReattachedWhileTheOwnerIsInvalid":      TestDetachedOwnerPolicyIsReattachedWhileTheOwnerIsInvalid,
		"RoutedNamespaceGetsItsOwnerPolicyBackOnTheWaypointAtOnce":   TestRoutedNamespaceGetsItsOwnerPolicyBackOnTheWaypointAtOnce,
		"DryRunAnnotationOnThePoliciesIsRestoredAndReported":         TestDryRunAnnotationOnThePoliciesIsRestoredAndReported,
		"AKeyAddedToTheWaypointPatchConfigMapIsRestoredAndReported":  TestAKeyAddedToTheWaypointPatchConfigMapIsRestoredAndReported,
		"ForeignSeccompConfigMapKeepsTheNamespaceOffTheWaypoint":     TestForeignSeccompConfigMapKeepsTheNamespaceOffTheWaypoint,
		"ForeignAllowAllPoliciesAreReported":                         TestForeignAllowAllPoliciesAreReported,
		"RevokeLeavesPodSecurityInPlace":                             TestRevokeOfASurvivingNamespaceLeavesPodSecurityInPlace,
		"RevokeKeepsAmbientForATerminatingPod":                       TestRevokeKeepsAmbientForATerminatingPodUntilItsGracePeriodEnds,
		"ZtunnelPolicyDeletedWithTheProfileStays":                    TestAZtunnelPolicyDeletedWithTheProfileStaysUntilItsPodsAreGone,
		"IstioDomainMetadataOfAnotherWriterIsRestoredAndReported":    TestIstioDomainMetadataOfAnotherWriterIsRestoredAndReported,
		"UnderARevisionTheWaypointKeepsItAndThePoliciesStayGlobal":   TestUnderARevisionTheWaypointKeepsItAndThePoliciesStayGlobal,
	} {
		t.Run(name, scenario)
	}
}

// A label-selected cache does not show another writer's object with a name a plugin wants; the
// runner reads that name from the API server and leaves the object alone: a ConflictError, no
// write to it, and the namespace is not routed to what it cannot vouch for. The Reader here also
// hides AuthorizationPolicies, which the contract forbids, to show the runner never writes over
// a foreign object whatever the Reader hides.
func TestForeignObjectHiddenByTheCacheIsAConflict(t *testing.T) {
	t.Parallel()
	foreignCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultWaypointName + "-seccomp", Namespace: ns},
		Data: map[string]string{"deployment": "spec: {}"}}
	foreignGW := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: config.DefaultWaypointName, Namespace: ns},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "other", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: "HTTP"}}}}
	foreignAP := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: ownerName, Namespace: ns},
		Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_ALLOW, Rules: []*securityv1beta1.Rule{{}}}}
	for _, tc := range []struct {
		name    string
		foreign client.Object
		list    client.ObjectList
		kind    string
	}{
		{"ConfigMap", foreignCM, &corev1.ConfigMapList{}, "ConfigMap"},
		{"Gateway", foreignGW, &gatewayv1.GatewayList{}, "Gateway"},
		{"AuthorizationPolicy", foreignAP, &istiosecurityv1.AuthorizationPolicyList{}, "AuthorizationPolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMesh(t, tc.foreign.DeepCopyObject().(client.Object))
			m.cfg.Mesh.Waypoint.SeccompPatch = ptr.To(true) // the opt-in that wants the ConfigMap
			m.configure(config.ModeAmbient)
			hides := func(obj runtime.Object) bool {
				_, policy := obj.(*istiosecurityv1.AuthorizationPolicy)
				_, policies := obj.(*istiosecurityv1.AuthorizationPolicyList)
				return cachedWithSelector(obj) || policy || policies
			}
			m.runner.Reader = selectedReader{Reader: m.c, t: t, hides: hides}
			m.runner.APIReader = recordingReader{Reader: m.c, reads: &m.apiReads}
			m.runner.Trimmed = []schema.GroupKind{configMapGK}
			require.NoError(t, m.runner.Reader.List(context.Background(), tc.list, client.InNamespace(ns)))
			require.Zero(t, meta.LenList(tc.list), "the fixture's cache must hide the foreign %s", tc.kind)
			before := tc.foreign.DeepCopyObject().(client.Object)
			require.NoError(t, m.c.Get(context.Background(), client.ObjectKeyFromObject(tc.foreign), before))

			for range 2 {
				res := m.apply()
				var conflict *runner.ConflictError
				require.True(t, errors.As(res.Err(), &conflict), "want a ConflictError, got %v", res.Err())
				assert.Equal(t, tc.foreign.GetName(), conflict.Ref.Name)
			}
			for _, w := range m.writes {
				assert.False(t, strings.HasSuffix(w, " "+tc.kind+"/"+tc.foreign.GetName()), "wrote over the foreign object: %v", m.writes)
			}
			after := tc.foreign.DeepCopyObject().(client.Object)
			require.NoError(t, m.c.Get(context.Background(), client.ObjectKeyFromObject(tc.foreign), after))
			assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "the foreign object changed")
			assert.NotContains(t, m.labels(), useWaypoint, "routed to a waypoint behind a foreign object")
			assert.Contains(t, m.apiReads, fmt.Sprintf("get %T/%s", tc.foreign, tc.foreign.GetName()))
		})
	}
}

// Pods are listed, in the namespace only, while the namespace is on its way into ambient and when a
// data-plane label may go (a drifted ztunnel policy); a namespace at rest costs no read and no write.
func TestPodsAreListedOnlyWhenADecisionNeedsThem(t *testing.T) {
	selectedWiring = true
	defer func() { selectedWiring = false }()
	m := newMesh(t)
	m.enrol()
	m.apiReads = nil

	res := m.apply()
	require.NoError(t, res.Err())
	assert.False(t, res.Changed())
	assert.Empty(t, m.writes, "steady state writes")
	assert.Empty(t, m.apiReads, "steady state reads past the cache")

	m.setAction(ztunnelName, securityv1beta1.AuthorizationPolicy_DENY, "kubectl-edit")
	m.addPod("app", nil)
	res = m.apply()
	require.NoError(t, res.Err())
	assert.Contains(t, m.apiReads, listPods, "the ztunnel policy drifted: dataplane-mode may go, so the pods decide")
	restoredNotRouted(t, m.labels())
	require.NoError(t, m.apply().Err())
	enrolled(t, m.labels())

	m.apiReads, m.writes = nil, nil
	m.apply()
	assert.Empty(t, m.apiReads, "at rest again")
	assert.Empty(t, m.writes)
}

// With an APIReader, the pods outside every data plane are reported in the calls that list pods:
// while a namespace that was in a mesh changes (here, a sidecar namespace's move to ambient).
func TestOptedOutPodsAreReportedWhileTheNamespaceChanges(t *testing.T) {
	selectedWiring = true
	defer func() { selectedWiring = false }()
	m := newMesh(t)
	m.labelNamespace(map[string]string{"istio-injection": "enabled"})
	require.NoError(t, m.c.Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "opted-out", Namespace: ns, Labels: map[string]string{dataplaneMode: "none"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}))
	res := m.apply()
	assert.Contains(t, strings.Join(res.Warnings(), "\n"), "opted-out")
	assert.Contains(t, m.apiReads, listPods)
}

// A new namespace (no label of any mesh) is enrolled without a read past the cache: the policies
// and the Gateway are fully cached, so a missing one is missing, and no decision of its first
// reconcile depends on its pods (issue 14: the first pass costs no more reads than the baseline's).
// Only a name of a kind the cache selects is read, the per-namespace seccomp patch's ConfigMap,
// where another writer's ConfigMap would otherwise be taken over. The decisions are the same as
// with every read made: the same writes, the same labels.
func TestNewNamespaceIsEnrolledWithoutReadsPastTheCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		seccomp   bool
		wantReads []string
	}{
		{"without the per-namespace patch", false, nil},
		{"with the per-namespace patch", true, []string{"get *v1.ConfigMap/" + config.DefaultWaypointName + "-seccomp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(wired bool) (reads, writes []string, labels map[string]string, warnings string) {
				m := newMesh(t)
				m.cfg.Mesh.Waypoint.SeccompPatch = &tc.seccomp
				m.configure(config.ModeAmbient)
				if wired {
					// The reference wiring: only ConfigMaps selected (profileplugins.CacheByObject).
					m.runner.Reader = selectedReader{Reader: m.c, t: t, hides: func(obj runtime.Object) bool {
						_, cm := obj.(*corev1.ConfigMap)
						_, cms := obj.(*corev1.ConfigMapList)
						return cm || cms
					}}
					m.runner.APIReader = recordingReader{Reader: m.c, reads: &m.apiReads}
					m.runner.FullyCached = []schema.GroupKind{istioPolicyGK, {Group: gatewayv1.GroupName, Kind: "Gateway"}}
					m.runner.Trimmed = []schema.GroupKind{configMapGK}
				}
				m.addPod("notebook", nil)
				res := m.apply()
				require.NoError(t, res.Err())
				return m.apiReads, m.writes, m.labels(), strings.Join(res.Warnings(), "\n")
			}
			reads, writes, labels, _ := run(true)
			assert.Equal(t, tc.wantReads, reads, "reads past the cache")
			allReads, allWrites, allLabels, _ := run(false)
			assert.Nil(t, allReads, "without an APIReader every read goes through the Reader")
			assert.Equal(t, allWrites, writes, "the same writes as with every object and pod read")
			assert.Equal(t, allLabels, labels)
			assert.Equal(t, "ambient", labels[dataplaneMode])
		})
	}
}

// Pod Security lists pods for its preflight only when podSecurity.preflight: hold may keep an
// existing enforce level: with apply, the default, the API server's own warning on the label write
// reports the violating pods (see TestPodSecurityWarningsReachTheResultWithoutAPodList in
// cmd/profile-plugins-controller), and a new namespace has no level to keep.
func TestPodSecurityListsPodsOnlyToHoldEnforce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var reads []string
	run := func(cfg *config.Config) *runner.Result {
		t.Helper()
		require.NoError(t, cfg.Validate())
		p, err := pss.New(cfg)
		require.NoError(t, err)
		r := newRunner(t, e, p)
		r.Reader = selectedReader{Reader: e, t: t, hides: cachedWithSelector}
		r.APIReader = recordingReader{Reader: e, reads: &reads}
		reads = nil
		res := r.Apply(context.Background(), testProfile())
		require.NoError(t, res.Err())
		return res
	}
	hold := func(level psaapi.Level, mode config.MeshMode) *config.Config {
		cfg := config.Default()
		cfg.PodSecurity.Preflight = config.PreflightHold
		cfg.PodSecurity.Enforce.Level = level
		cfg.Mesh.Mode = mode
		return cfg
	}
	run(hold(psaapi.LevelBaseline, config.ModeAmbient))
	assert.Empty(t, reads, "a new namespace has no enforce level to hold")
	writes := e.writes
	run(hold(psaapi.LevelBaseline, config.ModeAmbient))
	assert.Empty(t, reads, "at rest")
	assert.Equal(t, writes, e.writes)

	run(hold(psaapi.LevelRestricted, config.ModeNone))
	assert.Equal(t, []string{listPods}, reads, "tightening an existing level under hold: preflight")
	run(hold(psaapi.LevelRestricted, config.ModeNone))
	assert.Empty(t, reads)

	loose := config.Default()
	loose.Mesh.Mode = config.ModeNone
	run(loose)
	assert.Empty(t, reads, "loosening enforce needs no preflight")

	strict := config.Default()
	strict.PodSecurity.Enforce.Level = psaapi.LevelRestricted
	strict.Mesh.Mode = config.ModeNone
	run(strict)
	assert.Empty(t, reads, "tightening under apply: the API server reports the pods")
}

// Under hold, the pods listed past the cache decide: a violating pod keeps the existing level.
func TestPodSecurityHoldKeepsTheLevelOnPodsListedPastTheCache(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root-shell", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sh", Image: "busybox",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}})
	var reads []string
	apply := func(level psaapi.Level) *runner.Result {
		cfg := config.Default()
		cfg.PodSecurity.Preflight = config.PreflightHold
		cfg.PodSecurity.Enforce.Level = psaapi.LevelPrivileged
		cfg.Mesh.Mode = config.ModeNone
		if level != "" {
			cfg.PodSecurity.Enforce.Level = level
		}
		require.NoError(t, cfg.Validate())
		p, err := pss.New(cfg)
		require.NoError(t, err)
		r := newRunner(t, e, p)
		r.Reader = selectedReader{Reader: e, t: t, hides: cachedWithSelector}
		r.APIReader = recordingReader{Reader: e, reads: &reads}
		reads = nil
		return r.Apply(context.Background(), testProfile())
	}
	require.NoError(t, apply(psaapi.LevelPrivileged).Err())
	res := apply(psaapi.LevelBaseline)
	require.NoError(t, res.Err())
	assert.Equal(t, []string{listPods}, reads)
	assert.NotEmpty(t, res.Waiting(), "held")
	n := &corev1.Namespace{}
	require.NoError(t, e.Get(context.Background(), client.ObjectKey{Name: ns}, n))
	assert.Equal(t, string(psaapi.LevelPrivileged), n.Labels[psaapi.EnforceLevelLabel])
}
