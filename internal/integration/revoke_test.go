package integration

// Revoke on the real API server while pods outlive the Profile: Pod Security admission stays
// enforced in a namespace that survives, and the ztunnel policy outlasts the pods of a namespace
// that goes with its Profile, however garbage collection deletes it.
//
// The API server here runs without kube-controller-manager and without a kubelet. What they would
// do, the tests do by hand, and say so where they do: the garbage collector deletes the dependents
// of a deleted owner (k8s.io/kubernetes pkg/controller/garbagecollector, attemptToDeleteItem: an
// object whose owners are all gone, or all waiting for their dependents in a foreground deletion,
// is deleted; one with an owner left loses only the references to the others); the namespace
// controller deletes a namespace's pods first and the rest only once no pod is left
// (pkg/controller/namespace/deletion, ordered namespace deletion); the kubelet ends a pod being
// deleted and confirms it with a delete of grace period 0. A pod bound to a node gets its grace
// period from the API server (deletionTimestamp = the request's time plus the period) and stays,
// terminating, until that confirmation, as it would while its containers drain.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/runner/dryrun"
)

// controllerFinalizer stands in for the profiles controller's finalizer, under which it revokes.
const controllerFinalizer = "test.example.com/revoke"

// boundPod is a pod the scheduler has placed (spec.nodeName), so a delete gives it its grace
// period instead of removing it at once.
func boundPod(namespace, name string, privileged bool) *corev1.Pod {
	c := corev1.Container{Name: "app", Image: "registry.example.com/app:1"}
	if privileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       corev1.PodSpec{NodeName: "node-1", TerminationGracePeriodSeconds: ptr.To[int64](30), Containers: []corev1.Container{c}},
	}
}

// controlledProfile creates a Profile and its namespace with the Profile as controller, as the
// profiles controller creates them, and returns the Profile as read back (with its UID).
func controlledProfile(t *testing.T, c client.Client, name string) *profilev1.Profile {
	t.Helper()
	ctx := context.Background()
	const owner = "alice@example.com"
	p := &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{controllerFinalizer}},
		Spec: profilev1.ProfileSpec{Owner: fixture.User(owner)}}
	require.NoError(t, c.Create(ctx, p))
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{ownership.OwnerAnnotation: owner},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: profilev1.GroupVersion.String(), Kind: profilev1.Kind, Name: name,
			UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}))
	return p
}

// deleteProfile deletes the Profile with the given propagation and returns it as the API server
// keeps it meanwhile: being deleted, under its finalizers.
func deleteProfile(t *testing.T, c client.Client, p *profilev1.Profile, propagation metav1.DeletionPropagation) *profilev1.Profile {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Delete(ctx, p, client.PropagationPolicy(propagation)))
	got := &profilev1.Profile{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(p), got))
	require.NotNil(t, got.DeletionTimestamp)
	return got
}

// collectDependents does what the garbage collector does once owner is gone, or waits in a
// foreground deletion, for the kinds that matter here: it deletes every AuthorizationPolicy in
// namespace whose only owner is owner, and the namespace itself when owner is its only owner.
func collectDependents(t *testing.T, c client.Client, namespace string, owner types.UID) {
	t.Helper()
	ctx := context.Background()
	onlyOwner := func(obj client.Object) bool {
		refs := obj.GetOwnerReferences()
		return len(refs) == 1 && refs[0].UID == owner
	}
	policies := &istiosecurityv1.AuthorizationPolicyList{}
	require.NoError(t, c.List(ctx, policies, client.InNamespace(namespace)))
	for _, p := range policies.Items {
		if onlyOwner(p) {
			require.NoError(t, client.IgnoreNotFound(c.Delete(ctx, p)))
		}
	}
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: namespace}, n))
	if onlyOwner(n) {
		require.NoError(t, c.Delete(ctx, n))
	}
}

// deletePods does the first step of the namespace controller's ordered deletion: every pod is
// deleted, with its grace period.
func deletePods(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	require.NoError(t, c.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(namespace)))
}

// podEnds plays the kubelet: the pod's containers are gone, and it confirms with grace period 0.
func podEnds(t *testing.T, c client.Client, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.IgnoreNotFound(c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}},
		client.GracePeriodSeconds(0))))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Pod{}))
	}, 10*time.Second, 50*time.Millisecond)
}

func ztunnelPolicy(t *testing.T, c client.Client, namespace string) *istiosecurityv1.AuthorizationPolicy {
	t.Helper()
	p := &istiosecurityv1.AuthorizationPolicy{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: config.DefaultZtunnelPolicyName}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return p
}

func waits(res *runner.Result, what string) bool {
	for _, w := range res.Waiting() {
		if strings.Contains(w, what) {
			return true
		}
	}
	return false
}

// enrolledIn applies until the namespace is in ambient (no istiod here: the waypoint is never
// Programmed, so the namespace is enrolled and closed).
func enrolledIn(t *testing.T, c client.Client, r *runner.Runner, p *profilev1.Profile) {
	t.Helper()
	for range 2 {
		require.NoError(t, r.Apply(context.Background(), p).Err())
	}
	require.Equal(t, "ambient", namespaceLabels(t, c, p.Name)["istio.io/dataplane-mode"])
}

// Low finding of the Dec 1 review, and finding 4 of the second: Revoke of a namespace that
// outlives its Profile took the Pod Security labels off (at once, then once the last pod was
// gone), so the API server admitted privileged pods from whoever its surviving RoleBindings name.
// Now the labels stay for good: the API server refuses a privileged pod while a pod runs and
// after the last one is gone, and Revoke waits on no pod for them.
func TestRevokeOfASurvivingNamespaceKeepsPodSecurityForGood(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "revoke-pss-survives")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	require.Equal(t, "baseline", namespaceLabels(t, c, p.Name)["pod-security.kubernetes.io/enforce"])
	require.NoError(t, c.Create(ctx, boundPod(p.Name, "notebook", false)))

	res := r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	assert.False(t, waits(res, "pod-security.kubernetes.io/"), "%v", res.Waiting())
	labels := namespaceLabels(t, c, p.Name)
	assert.Equal(t, "baseline", labels["pod-security.kubernetes.io/enforce"])
	assert.NotContains(t, labels, "istio.io/use-waypoint")
	err := c.Create(ctx, boundPod(p.Name, "escalated", true))
	require.True(t, apierrors.IsForbidden(err), "Pod Security admission still refuses a privileged pod: %v", err)
	assert.Contains(t, err.Error(), `violates PodSecurity "baseline:latest"`)

	podEnds(t, c, p.Name, "notebook")
	res = r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.Equal(t, "baseline", namespaceLabels(t, c, p.Name)["pod-security.kubernetes.io/enforce"], "the labels stay after the last pod")
	err = c.Create(ctx, boundPod(p.Name, "escalated", true))
	require.True(t, apierrors.IsForbidden(err), "still refused once no pod runs: %v", err)
}

// A namespace being deleted goes away with its Pod Security labels: Revoke leaves them to the
// deletion and does not wait, although a pod still runs there.
func TestRevokeOfADeletedNamespaceLeavesPodSecurityToItsDeletion(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "revoke-pss-deleted")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	require.NoError(t, c.Create(ctx, boundPod(p.Name, "notebook", false)))
	// No namespace controller runs here, so the namespace stays Terminating with its content.
	require.NoError(t, c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}))

	res := r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting(), "a namespace that is going away holds no finalizer")
	labels := namespaceLabels(t, c, p.Name)
	assert.Equal(t, "baseline", labels["pod-security.kubernetes.io/enforce"])
	assert.Equal(t, "ambient", labels["istio.io/dataplane-mode"], "the pod stays in ambient while it runs")
	assert.NotContains(t, labels, "istio.io/use-waypoint")
}

// [guard] window: in a namespace the Profile controls, a foreground deletion of the Profile makes
// the garbage collector delete the ztunnel policy at once, while the namespace's pods are still
// terminating; without an ALLOW policy ztunnel admits every caller to them. The finalizer keeps
// the policy, still applying, and the namespace enrolled, until the last pod is gone; then Revoke
// lets it go.
func TestForegroundProfileDeletionKeepsTheZtunnelPolicyUntilThePodsAreGone(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := controlledProfile(t, c, "revoke-foreground")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	require.Equal(t, []string{plugin.ProtectionFinalizer}, ztunnelPolicy(t, c, p.Name).Finalizers)
	require.NoError(t, c.Create(ctx, boundPod(p.Name, "notebook", false)))

	deleting := deleteProfile(t, c, p, metav1.DeletePropagationForeground)
	require.Contains(t, deleting.Finalizers, metav1.FinalizerDeleteDependents, "the API server marks a foreground deletion")
	// The garbage collector, before the controller revokes: the namespace and the policies go.
	collectDependents(t, c, p.Name, p.UID)
	// The namespace controller deletes the pods first; the notebook drains for its grace period.
	deletePods(t, c, p.Name)
	pod := &corev1.Pod{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: "notebook"}, pod))
	require.NotNil(t, pod.DeletionTimestamp, "terminating")

	zt := ztunnelPolicy(t, c, p.Name)
	require.NotNil(t, zt, "the finalizer keeps the ztunnel policy the garbage collector deleted")
	require.NotNil(t, zt.DeletionTimestamp)
	assert.Nil(t, func() *istiosecurityv1.AuthorizationPolicy {
		o := &istiosecurityv1.AuthorizationPolicy{}
		if apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: p.Name, Name: config.DefaultOwnerPolicyName}, o)) {
			return nil
		}
		return o
	}(), "what has no finalizer is gone: the collection really ran")

	res := r.Revoke(ctx, deleting)
	require.NoError(t, res.Err())
	assert.True(t, waits(res, "which is being deleted, until no pod depends on it"), "%v", res.Waiting())
	assert.True(t, waits(res, "notebook"), "%v", res.Waiting())
	require.NotNil(t, ztunnelPolicy(t, c, p.Name), "kept while the pod terminates")
	assert.Equal(t, "ambient", namespaceLabels(t, c, p.Name)["istio.io/dataplane-mode"], "the pod stays captured, under the policy")

	podEnds(t, c, p.Name, "notebook")
	res = r.Revoke(ctx, deleting)
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting(), "the finalizer may go")
	assert.Nil(t, ztunnelPolicy(t, c, p.Name), "released once the last pod is gone, so the namespace's deletion can finish")
}

// [guard] window, background deletion (kubectl's and kfam's default): the garbage collector acts
// only once the Profile is gone, after Revoke. Revoke therefore hands the ztunnel policy to the
// namespace's deletion: no Profile owner reference (the collector leaves it alone) and no
// finalizer (nothing would remove it once the Profile is gone). The ordered namespace deletion
// then removes it only after the pods, and nothing blocks that deletion.
func TestBackgroundProfileDeletionLeavesTheZtunnelPolicyToTheNamespacesDeletion(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := controlledProfile(t, c, "revoke-background")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	require.NoError(t, c.Create(ctx, boundPod(p.Name, "notebook", false)))

	deleting := deleteProfile(t, c, p, metav1.DeletePropagationBackground)
	res := r.Revoke(ctx, deleting)
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting(), "the finalizer must not wait: the pods end with the namespace, after the Profile")
	zt := ztunnelPolicy(t, c, p.Name)
	require.NotNil(t, zt)
	assert.Empty(t, zt.OwnerReferences, "no longer the Profile's dependent")
	assert.Empty(t, zt.Finalizers)
	again := r.Revoke(ctx, deleting)
	require.NoError(t, again.Err())
	assert.False(t, again.Changed(), "handed over once")

	// The controller removes its finalizer; the Profile is gone, and the collector deletes its
	// dependents: the namespace, not the ztunnel policy.
	deleting.Finalizers = nil
	require.NoError(t, c.Update(ctx, deleting))
	collectDependents(t, c, p.Name, p.UID)
	require.NotNil(t, ztunnelPolicy(t, c, p.Name), "the garbage collector left it")
	deletePods(t, c, p.Name)
	require.NotNil(t, ztunnelPolicy(t, c, p.Name), "the ordered deletion keeps it while the pod terminates")
	assert.Equal(t, "ambient", namespaceLabels(t, c, p.Name)["istio.io/dataplane-mode"])

	podEnds(t, c, p.Name, "notebook")
	// No pod is left: the namespace controller deletes the rest, and nothing holds the policy.
	require.NoError(t, c.Delete(ctx, ztunnelPolicy(t, c, p.Name)))
	assert.Nil(t, ztunnelPolicy(t, c, p.Name))
}

// The finalizer never waits on a pod longer than its grace period: a pod whose object lingers
// after it (its node lost, or a finalizer of its own) is past the kubelet's kill, so it holds
// nothing. And a namespace force-deleted (its spec.finalizers emptied through /finalize) is gone
// at once, the finalizer notwithstanding, and Revoke of it succeeds.
func TestTheZtunnelPolicyFinalizerNeverBlocksForever(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := controlledProfile(t, c, "revoke-bounded")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	lingering := boundPod(p.Name, "lingering", false)
	lingering.Finalizers = []string{"test.example.com/lost-node"}
	lingering.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	require.NoError(t, c.Create(ctx, lingering))
	t.Cleanup(func() {
		lingering.Finalizers = nil
		_ = c.Patch(context.Background(), lingering, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})

	deleting := deleteProfile(t, c, p, metav1.DeletePropagationForeground)
	collectDependents(t, c, p.Name, p.UID)
	deletePods(t, c, p.Name)
	res := r.Revoke(ctx, deleting)
	require.NoError(t, res.Err())
	require.True(t, waits(res, "lingering"), "within its grace period the pod still counts: %v", res.Waiting())

	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(lingering), lingering))
	time.Sleep(time.Until(lingering.DeletionTimestamp.Time) + 100*time.Millisecond)
	res = r.Revoke(ctx, deleting)
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
	assert.Nil(t, ztunnelPolicy(t, c, p.Name), "released although the pod's object is still there")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(lingering), &corev1.Pod{}), "the pod's object lingers")

	// Force deletion: another namespace whose ztunnel policy is being deleted, held by the finalizer.
	q := controlledProfile(t, c, "revoke-forced")
	enrolledIn(t, c, r, q)
	require.NoError(t, c.Delete(ctx, ztunnelPolicy(t, c, q.Name)))
	require.NoError(t, c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: q.Name}}))
	n := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: q.Name}, n))
	n.Spec.Finalizers = nil
	clientset := newClientset(t, env)
	_, err := clientset.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: q.Name}, &corev1.Namespace{}))
	}, 10*time.Second, 50*time.Millisecond, "the finalizer on its content does not hold a force-deleted namespace")
	res = r.Revoke(ctx, deleteProfile(t, c, q, metav1.DeletePropagationForeground))
	require.NoError(t, res.Err())
	assert.Empty(t, res.Waiting())
}

func newClientset(t *testing.T, env *envtest.Env) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Base)
	require.NoError(t, err)
	return cs
}

// The runner deletes an object that carries its finalizer and then takes the finalizer off, which
// deletes it for real. In a dry run the server answers that patch against the persisted object,
// which no dry run deleted, so the dry run reads the answer as the object gone, as the real writes
// leave it, and persists nothing.
func TestADryRunReadsAFinalizerTakenOffAfterItsDeleteAsTheObjectGone(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	ensureNamespace(t, c, "dryrun-finalizer")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "dryrun-finalizer", Finalizers: []string{plugin.ProtectionFinalizer}}}
	require.NoError(t, c.Create(ctx, cm))
	t.Cleanup(func() {
		_ = c.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	d := dryrun.NewClient(c, nil)

	require.NoError(t, d.Delete(ctx, cm.DeepCopy()))
	patch := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers/0"}]`))
	require.NoError(t, d.Patch(ctx, cm.DeepCopy(), patch))

	writes := d.Writes()
	require.Len(t, writes, 2)
	assert.Nil(t, writes[0].After)
	assert.Nil(t, writes[1].After, "the patch deleted it")
	assert.True(t, apierrors.IsNotFound(d.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})), "the run reads it as gone")
	live := &corev1.ConfigMap{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cm), live), "nothing persisted")
	assert.Nil(t, live.DeletionTimestamp)
}

// A surviving namespace keeps Pod Security for the bindings that survive its Profile (review
// "Second review", finding 4, docs/security/reviews.md; medium, Pod Security loosened and the mesh
// left, reachable by a contributor). When a Profile whose namespace survives it (owned by the owner
// annotation: an admin made it) is deleted, Revoke waits for the last pod and then takes every Pod
// Security label and the ambient labels off, with the ztunnel policy. The contributors'
// RoleBindings stay: kfam makes them with no owner reference, so the Profile's deletion does not
// collect them. A contributor (kubeflow-edit may create pods) then creates a privileged pod, and
// the API server admits it (no enforce label: the cluster default, privileged unless the admin
// configured PodSecurity admission otherwise), out of the mesh (no istio.io/dataplane-mode, so
// ztunnel captures nothing and no ztunnel policy exists: any pod of any namespace reaches it in
// plaintext). The namespace ends less protected than it was while the Profile lived, in the hands
// of the same people. The owner may make such bindings for themselves too (kubeflow-admin creates
// RoleBindings).
func TestRevokeKeepsPodSecurityForSurvivingBindings(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "attack-survives")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	bob := asContributor(t, env, p.Name, "bob@example.com", "user-bob-example-com-clusterrole-edit")
	err := bob.Create(ctx, boundPod(p.Name, "bob-privileged", true))
	require.True(t, apierrors.IsForbidden(err), "while the Profile lives, Pod Security refuses the contributor's privileged pod: %v", err)

	// The admin deletes the Profile; no pod runs, so Revoke finishes at once.
	res := r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	require.Empty(t, res.Waiting())
	labels := namespaceLabels(t, c, p.Name)
	t.Logf("the surviving namespace's labels after Revoke: %v", labels)

	err = bob.Create(ctx, boundPod(p.Name, "bob-privileged", true))
	assert.Error(t, err, "the contributor's RoleBinding survived the Profile, and the namespace now admits their privileged pod")
	assert.NotEmpty(t, labels["pod-security.kubernetes.io/enforce"], "the surviving namespace was left without Pod Security")
}

// The Profile's condition does not grow with the tenant's pods (review "Second review", finding 5,
// docs/security/reviews.md; low, denial of service of one Profile's reconciles, and load on the
// shared controller). The Result's waiting reasons and errors name every pod they count, without a
// bound (runner/holds.go, the data-plane and admission holds; pss/pss.go, preflight), and
// kubeflow.Condition joins them all into the one message the controller patches into the Profile's
// status on every change (cmd/profile-plugins-controller, writeCondition). Pod names are the
// tenant's choice, up to 253 characters, and their number is bounded only by a ResourceQuota: a
// hundred pods with long names already take the message past the 32768 characters Kubernetes allows
// a metav1.Condition message, and some 3,000 past the API server's 1.5 MB object limit, when the
// status patch fails on every reconcile, each of which lists all the pods again past the cache.
// Pending pods count (neither finished nor being deleted), so they need no node.
func TestConditionBoundedByTenantPods(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t)
	c := env.Client
	ctx := context.Background()
	p := profileIn(t, c, "attack-condition")
	r := runnerFor(t, c, config.ModeAmbient)
	enrolledIn(t, c, r, p)
	const pods = 80
	for i := range pods {
		name := fmt.Sprintf("%s-%03d", strings.Repeat("p", 240), i)
		require.NoError(t, c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}}}}))
	}
	res := r.Revoke(ctx, p)
	require.NoError(t, res.Err())
	msg := kubeflow.Condition(res).Message
	t.Logf("%d pods: the Profile's condition message has %d characters", pods, len(msg))
	assert.LessOrEqual(t, len(msg), 32768, "the condition message grows with the number and names of the tenant's pods")
}

// removeNamespaceNow deletes namespace name and finalizes it at once, as no namespace controller
// runs beside the test API server, and waits until it is gone: the next create of that name makes
// a new namespace with a new UID.
func removeNamespaceNow(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}))
	n, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.Finalizers = nil
	_, err = cs.CoreV1().Namespaces().Finalize(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 10*time.Second, 50*time.Millisecond, "namespace %s is gone", name)
}
