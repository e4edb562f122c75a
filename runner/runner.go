package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// DefaultWaitRequeue is how soon a waiting namespace is reconciled again when Runner.WaitRequeue
// is zero. Controllers should also watch the objects waited for; this is the fallback.
const DefaultWaitRequeue = 15 * time.Second

// ErrNamespaceNotFound is returned when the Profile's namespace does not exist yet. The runner
// never creates it: that is the profiles controller's job, and an apply would create it without
// the controller's owner reference.
var ErrNamespaceNotFound = errors.New("namespace not found")

// Runner applies and revokes a set of plugins for one Profile at a time. It keeps no state between
// calls and is safe for concurrent use on different Profiles.
type Runner struct {
	// Client writes. Its scheme must know every type the plugins emit (see AddToScheme).
	Client client.Client
	// Reader observes; a manager's cached client keeps steady-state reconciles free of API reads.
	// Nil means Client. What it must show of the namespace:
	//   - the Namespace itself, and every object of each plugin's Kinds that a plugin reads from
	//     other writers: AuthorizationPolicies (the access plugin warns about other writers'
	//     allow-all policies and adopts kfam's contributor policies) and RoleBindings, as
	//     metadata (kfam marks its bindings with annotations only, which no selector selects);
	//   - of the other Kinds (ConfigMap, Gateway), every object without an APIReader. With an
	//     APIReader it may show only the plugins' own ([ManagedSelector], a cache.ByObject label
	//     selector): a wanted object it does not show is read from APIReader before anything is
	//     written, so another writer's object with a wanted name is still a ConflictError; a kind
	//     listed in FullyCached is not read so;
	//   - Pods, on every call, without an APIReader; with one, pods are never read through it.
	Reader client.Reader
	// APIReader reads past the Reader's cache (a manager's GetAPIReader()). With it the runner
	// lists a namespace's pods, from the API server and in that namespace only, when a decision of
	// the call needs them: Pod Security's preflight hold (an existing enforce level about to get
	// stricter), a namespace leaving a mesh for ambient, a data-plane label or a pod-protecting
	// object that may go (see PodDemand, DataPlane, PodProtector), and on Revoke. A steady-state
	// call reads nothing, nor does a new namespace's first one; warnings only the pods can give
	// (pods outside every data plane, pods still running a sidecar) are then given in the calls
	// that list them, and the API server reports pods a stricter enforce label forbids (see
	// WithWarnings). Nil reads everything through Reader.
	APIReader client.Reader
	// FullyCached lists the kinds of which the Reader shows every object of the namespace (a cache
	// without a selector for them). A wanted object of such a kind that the Reader does not show
	// does not exist, so it is not read from APIReader. Nil: no kind is known to be fully shown,
	// and every wanted object the Reader does not show is read. [WithManager] derives
	// it from the manager's cache options.
	FullyCached []schema.GroupKind
	// Plugins run in this order within each phase.
	Plugins []plugin.Plugin
	// WaitRequeue is the requeue delay while a plugin waits; zero means DefaultWaitRequeue.
	WaitRequeue time.Duration
	// Namespaces decides which namespaces are the Profile's to write into; the zero value is
	// the default rule and refuses ownership.AlwaysReserved.
	Namespaces ownership.Policy
}

// NewRunner checks the plugins' names and returns a Runner that reads and writes through c.
func NewRunner(c client.Client, plugins ...plugin.Plugin) (*Runner, error) {
	return New(c, plugins)
}

// New checks the plugins' names and returns a Runner that reads and writes through c, configured
// by opts in order.
func New(c client.Client, plugins []plugin.Plugin, opts ...Option) (*Runner, error) {
	seen := map[string]bool{}
	for i, p := range plugins {
		name := p.Name()
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			return nil, fmt.Errorf("plugins[%d].Name() %q: %s", i, name, strings.Join(msgs, "; "))
		}
		if seen[name] {
			return nil, fmt.Errorf("plugins[%d].Name() %q: used by another plugin", i, name)
		}
		seen[name] = true
	}
	r := &Runner{Client: c, Plugins: plugins}
	for _, o := range opts {
		o(r)
	}
	return r, nil
}

func (r *Runner) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// planned is one plugin's generated state, decorated and keyed for the runner's phases.
type planned struct {
	plugin  plugin.Plugin
	res     *PluginResult
	desired plugin.Desired
	objects []applyObject
	failed  bool // generation failed: touch nothing of this plugin
}

type applyObject struct {
	ref  plugin.Ref
	gvk  schema.GroupVersionKind
	data map[string]any // the apply body
	// broken says why the object does not protect after phase 1; "" when it does.
	broken string
	// restored: phase 1 found another writer's change on the object and wrote the desired one
	// back (or tried to). What the data plane runs may still be the changed version until the
	// control plane has caught up (istiod programs a restored Gateway some time after the write),
	// so the routing labels that require the object wait for the next call.
	restored bool
	// rewritten: phase 1 writes a change to an object whose readiness its plugin judged from
	// the observed status (Desired.ReadyFromStatus), which describes the version before the write.
	rewritten bool
}

// Apply brings the Profile's namespace to what the plugins want, in four phases (see the package
// doc): enrolment labels that change are withdrawn first, then objects are applied, then labels,
// each gated on the protection it requires, then stale objects are pruned. Errors of one object or
// plugin are recorded in the Result and do not stop the others; only a failure to observe the
// namespace stops the call.
func (r *Runner) Apply(ctx context.Context, profile *profilev1.Profile) *Result {
	res := r.newResult()
	if !r.admitApply(ctx, profile, res) {
		return res
	}
	if profile.UID == "" {
		res.Errors = append(res.Errors, fmt.Errorf("profile %q has no UID: pass the object read from the API server", profile.Name))
		return res
	}
	ns, obs, notServed, err := r.observe(ctx, profile.Name)
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}
	plans, obs, held, err := r.generate(ctx, res, profile, ns, obs, notServed)
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}

	// Phase 0: withdraw enrolment labels that are going away or changing, before the objects
	// they send traffic to are rewritten.
	withdrawn := r.withdrawEnrolment(ctx, plans, ns, held, res)
	// Phase 1: objects. Policies must exist before any label enrols the namespace. When a
	// withdrawal failed, the label still routes traffic to what the objects are now, so no existing
	// object is rewritten (and, below, none is pruned) until a later call has withdrawn it.
	sofar := protections{why: map[plugin.Ref]string{}, obs: obs}
	for _, p := range plans {
		if !p.failed {
			r.applyObjects(ctx, p, obs, withdrawn, sofar)
		}
	}
	// Phase 2: labels, each gated on the protection it requires, in one write for all plugins.
	why := protection(plans, obs)
	want := map[string]map[string]string{}
	for _, p := range plans {
		if !p.failed {
			want[p.plugin.Name()] = decideLabels(p, ns, why, held)
		}
	}
	r.writeLabels(ctx, ns, plans, want, res)
	// Phase 3: prune what plugins made earlier and want no more; protection comes down last.
	for _, p := range plans {
		if !p.failed && withdrawn {
			r.prune(ctx, p, obs, held, true)
		}
	}
	return res
}

// Revoke takes down what the plugins made, in the order that keeps pods covered: routing labels
// first, then the objects behind them; data-plane labels and the objects they require last, and
// only once no running pod would be left outside every data plane. While such pods run, it says
// so in Waiting (the controller requeues) unless the namespace is going away anyway, because it is
// being deleted or the Profile is its controller: then those are left to the namespace's deletion
// and garbage collection, so a finalizer never waits on pods. It is idempotent, and a missing
// namespace is success.
func (r *Runner) Revoke(ctx context.Context, profile *profilev1.Profile) *Result {
	res := r.newResult()
	if !r.admitRevoke(ctx, profile, res) {
		return res
	}
	ns, obs, _, err := r.observe(ctx, profile.Name)
	if errors.Is(err, ErrNamespaceNotFound) {
		return res
	}
	if err == nil && r.APIReader != nil && revokeNeedsPods(r.Plugins) {
		obs.Pods, err = r.listPods(ctx, profile.Name)
	}
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}
	held := holdDataPlane(r.Plugins, ns, obs)
	leaving := ns.DeletionTimestamp != nil || controlledBy(ns, profile)
	plans := make([]*planned, len(r.Plugins))
	want := map[string]map[string]string{}
	for i, p := range r.Plugins {
		plans[i] = &planned{plugin: p, res: &res.Plugins[i]}
		want[p.Name()] = held.labelsOf(p.Name())
		if !leaving {
			plans[i].res.Waiting = append(plans[i].res.Waiting, held.waiting(p.Name())...)
		}
	}
	if !r.writeLabels(ctx, ns, plans, want, res) {
		// A label that could not be taken off may still route traffic to, or enrol pods behind,
		// the objects: they stay until the next Revoke has taken the labels off.
		return res
	}
	for i, p := range r.Plugins {
		r.prune(ctx, &planned{plugin: p, res: &res.Plugins[i]}, obs, held, !leaving)
	}
	return res
}

func (r *Runner) newResult() *Result {
	res := &Result{WaitRequeue: r.WaitRequeue}
	if res.WaitRequeue == 0 {
		res.WaitRequeue = DefaultWaitRequeue
	}
	for _, p := range r.Plugins {
		res.Plugins = append(res.Plugins, PluginResult{Plugin: p.Name()})
	}
	return res
}

// observe reads the namespace and every object of the plugins' kinds in it through the Reader,
// and, without an APIReader, its pods.
func (r *Runner) observe(ctx context.Context, name string) (*corev1.Namespace, plugin.Observed, unserved, error) {
	ns := &corev1.Namespace{}
	if err := r.reader().Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, plugin.Observed{}, nil, fmt.Errorf("namespace %q: %w", name, ErrNamespaceNotFound)
		}
		return nil, plugin.Observed{}, nil, fmt.Errorf("reading namespace %q: %w", name, err)
	}
	obs := plugin.Observed{Labels: ns.Labels, LabelManagers: labelManagers(ns)}
	listed := map[schema.GroupVersionKind]bool{}
	missing := unserved{}
	wantPods := false
	for _, p := range r.Plugins {
		if po, ok := p.(plugin.PodObserver); ok && po.NeedsPods() {
			wantPods = true
		}
		if _, ok := p.(plugin.DataPlane); ok {
			wantPods = true
		}
		for _, l := range p.Kinds() {
			gvk, err := gvkFor(r.Client.Scheme(), l)
			if err != nil {
				return nil, plugin.Observed{}, nil, fmt.Errorf("plugin %s: kind %T: %w", p.Name(), l, err)
			}
			if listed[gvk] {
				continue
			}
			listed[gvk] = true
			itemGVK := gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))
			list := l.DeepCopyObject().(client.ObjectList)
			if err := r.reader().List(ctx, list, client.InNamespace(name)); err != nil {
				// A kind the API server does not serve has no objects (see served.go).
				if notServed(err, r.Client.RESTMapper(), itemGVK) {
					missing[itemGVK] = true
					continue
				}
				return nil, plugin.Observed{}, nil, fmt.Errorf("listing %s in %q: %w", gvk.Kind, name, err)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return nil, plugin.Observed{}, nil, err
			}
			for _, it := range items {
				obj := it.(client.Object)
				obj.GetObjectKind().SetGroupVersionKind(itemGVK)
				obs.Objects = append(obs.Objects, obj)
			}
		}
	}
	if wantPods && r.APIReader == nil {
		// Through the Reader on every call, as before APIReader existed; with an APIReader,
		// generate lists them only when a decision needs them.
		pods, err := r.listPods(ctx, name)
		if err != nil {
			return nil, plugin.Observed{}, nil, err
		}
		obs.Pods = pods
	}
	return ns, obs, missing, nil
}

// plan runs every plugin's Generate and turns its objects into apply bodies.
func plan(s *runtime.Scheme, plugins []plugin.Plugin, res *Result, t plugin.Target, notServed unserved) []*planned {
	plans := make([]*planned, len(plugins))
	for i, p := range plugins {
		pl := &planned{plugin: p, res: &res.Plugins[i]}
		plans[i] = pl
		d, err := p.Generate(t)
		if err == nil {
			pl.desired = d
			pl.objects, err = decorate(s, p, t, d.Objects)
		}
		if err != nil {
			pl.failed = true
			pl.res.Errors = append(pl.res.Errors, inputError{fmt.Errorf("plugin %s: %w", p.Name(), err)})
			continue
		}
		if err := wantsNotServed(pl.objects, notServed); err != nil {
			pl.failed = true
			pl.res.Errors = append(pl.res.Errors, fmt.Errorf("plugin %s: %w", p.Name(), err))
			continue
		}
		pl.res.Waiting = append(pl.res.Waiting, d.Waiting...)
		pl.res.Warnings = append(pl.res.Warnings, d.Warnings...)
		for _, e := range d.Errors {
			pl.res.Errors = append(pl.res.Errors, inputError{fmt.Errorf("plugin %s: %w", p.Name(), e)})
		}
	}
	refuseLabelClashes(plans)
	warnSecondWriters(plans, t.Observed)
	return plans
}

// refuseLabelClashes stops two plugins from fighting over one namespace label: both would force
// their value on every reconcile. The earlier plugin keeps the key; the later one gets an error.
func refuseLabelClashes(plans []*planned) {
	type claim struct{ plugin, value string }
	claims := map[string]claim{}
	for _, p := range plans {
		if p.failed {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(p.desired.Labels)) {
			v := p.desired.Labels[k]
			c, taken := claims[k]
			if !taken {
				claims[k] = claim{p.plugin.Name(), v}
				continue
			}
			if c.value != v {
				p.res.Errors = append(p.res.Errors, inputError{fmt.Errorf("plugin %s: namespace label %s=%q clashes with plugin %s's %q; it is not applied",
					p.plugin.Name(), k, v, c.plugin, c.value)})
				p.desired.Labels = maps.Clone(p.desired.Labels)
				delete(p.desired.Labels, k)
			}
		}
	}
}

// decorate checks a plugin's objects and builds their apply bodies: managed labels, the Profile
// as controller owner (when the Profile has a UID), no status, and the desired-hash annotation.
func decorate(s *runtime.Scheme, p plugin.Plugin, t plugin.Target, objs []client.Object) ([]applyObject, error) {
	kinds := map[schema.GroupVersionKind]bool{}
	for _, l := range p.Kinds() {
		gvk, err := gvkFor(s, l)
		if err != nil {
			return nil, err
		}
		kinds[gvk.GroupVersion().WithKind(strings.TrimSuffix(gvk.Kind, "List"))] = true
	}
	out := make([]applyObject, 0, len(objs))
	seen := map[plugin.Ref]bool{}
	for i, obj := range objs {
		gvk, err := gvkFor(s, obj)
		if err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
		if !kinds[gvk] {
			return nil, fmt.Errorf("objects[%d]: %s is not among the plugin's Kinds(), so it could never be pruned", i, gvk.Kind)
		}
		ref := plugin.Ref{GroupKind: gvk.GroupKind(), Name: obj.GetName()}
		if obj.GetName() == "" {
			return nil, fmt.Errorf("objects[%d] (%s): metadata.name is empty", i, gvk.Kind)
		}
		if ns := obj.GetNamespace(); ns != "" && ns != t.Namespace {
			return nil, fmt.Errorf("objects[%d] (%s): metadata.namespace %q is not the target namespace %q", i, ref, ns, t.Namespace)
		}
		if seen[ref] {
			return nil, fmt.Errorf("objects[%d]: %s is generated twice", i, ref)
		}
		seen[ref] = true

		body, err := applyBody(obj, gvk)
		if err != nil {
			return nil, fmt.Errorf("objects[%d] (%s): %w", i, ref, err)
		}
		// Decorate the JSON form directly: cheaper than copying the typed object first.
		md, _ := body["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			body["metadata"] = md
		}
		md["namespace"] = t.Namespace
		labels, _ := md["labels"].(map[string]any)
		if labels == nil {
			labels = make(map[string]any, 2)
			md["labels"] = labels
		}
		labels[plugin.ManagedByLabel] = plugin.ManagedByValue
		labels[plugin.PluginLabel] = p.Name()
		if t.Profile != nil && t.Profile.UID != "" {
			md["ownerReferences"] = []any{map[string]any{
				"apiVersion":         profilev1.GroupVersion.String(),
				"kind":               profilev1.Kind,
				"name":               t.Profile.Name,
				"uid":                string(t.Profile.UID),
				"controller":         true,
				"blockOwnerDeletion": true,
			}}
		}
		out = append(out, applyObject{ref: ref, gvk: gvk, data: body})
	}
	return out, nil
}

// cleanUnstructured is obj's JSON form as applyBody makes it.
func cleanUnstructured(s *runtime.Scheme, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := gvkFor(s, obj)
	if err != nil {
		return nil, err
	}
	m, err := applyBody(obj, gvk)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// applyBody is obj's JSON form with apiVersion and kind, without status (never ours to apply)
// and without the empty creationTimestamp that typed objects marshal.
func applyBody(obj client.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	m, err := ssa.ToMap(obj)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	return m, nil
}

// gvkCache remembers the scheme's answer per Go type: the lookup allocates, and the runner asks
// for the same few types on every reconcile.
var gvkCache sync.Map // gvkKey -> schema.GroupVersionKind

type gvkKey struct {
	s *runtime.Scheme
	t reflect.Type
}

func gvkFor(s *runtime.Scheme, obj runtime.Object) (schema.GroupVersionKind, error) {
	switch obj.(type) {
	// One Go type stands for many kinds here: the kind is in the object, never cache it by type.
	case runtime.Unstructured, *metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList:
		return apiutil.GVKForObject(obj, s)
	}
	key := gvkKey{s, reflect.TypeOf(obj)}
	if v, ok := gvkCache.Load(key); ok {
		return v.(schema.GroupVersionKind), nil
	}
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return gvk, err
	}
	gvkCache.Store(key, gvk)
	return gvk, nil
}

func findObserved(obs plugin.Observed, gvk schema.GroupVersionKind, name string) client.Object {
	for _, o := range obs.Objects {
		if o.GetName() == name && o.GetObjectKind().GroupVersionKind() == gvk {
			return o
		}
	}
	return nil
}

// applyObjects writes the plugin's objects. With rewrite false (a withdrawal failed) it only
// creates missing ones: an object that exists stays as it is and counts as what it is. A missing
// object is created only once what it requires (Desired.CreateRequires) protects; sofar records,
// object by object, what protects after the writes made so far in this phase.
func (r *Runner) applyObjects(ctx context.Context, p *planned, obs plugin.Observed, rewrite bool, sofar protections) {
	adopt := map[plugin.Ref]bool{}
	for _, ref := range p.desired.Adopt {
		adopt[ref] = true
	}
	for i := range p.objects {
		ao := &p.objects[i]
		ao.broken = r.applyOne(ctx, p, ao, obs, rewrite, adopt[ao.ref], sofar)
		sofar.why[ao.ref] = ao.broken
	}
}

// applyOne decides whether one object is written now, and says why it does not protect after
// that ("" when it does).
func (r *Runner) applyOne(ctx context.Context, p *planned, ao *applyObject, obs plugin.Observed, rewrite, adoptable bool, sofar protections) string {
	cur := findObserved(obs, ao.gvk, ao.ref.Name)
	if cur == nil {
		if gaps := sofar.gapsSoFar(p.desired.CreateRequires[ao.ref]); len(gaps) > 0 {
			p.res.Waiting = append(p.res.Waiting, fmt.Sprintf("%s is not created yet: %s", ao.ref, strings.Join(gaps, ", ")))
			return "is not created yet"
		}
		return r.applyObject(ctx, p, ao, cur, adoptable)
	}
	if !rewrite {
		broken := asItIs(cur, p.plugin.Name())
		if extras := ownApplyExtras(cur, p.plugin.Name(), ao.data); broken == "" && len(extras) > 0 {
			broken = "holds content the plugin does not set (" + strings.Join(extras, ", ") + ")"
		}
		if body, err := withHash(ao.data); err != nil || !matches(cur, body) || broken != "" {
			p.res.Waiting = append(p.res.Waiting, fmt.Sprintf("%s is left as it is until the enrolment labels that route to it are withdrawn", ao.ref))
		}
		return broken
	}
	return r.applyObject(ctx, p, ao, cur, adoptable)
}

// asItIs says why an observed object that is not written in this call does not protect ("" when
// it does): it protects while it carries the plugin's labels and no other writer's spec fields.
func asItIs(cur client.Object, pluginName string) string {
	if !plugin.IsManagedBy(cur.GetLabels(), pluginName) {
		return "exists and was made by " + (&ConflictError{ManagedBy: managedBy(cur.GetLabels())}).who()
	}
	if f := foreignSpecFields(cur, pluginName); len(f) > 0 {
		return "was changed by another writer (" + describeForeign(f) + ")"
	}
	return ""
}

// applyObject writes one object if it is not as desired, and says why it does not protect after
// the call ("" when it does: as desired, written now, or an earlier version of the plugin's own
// that still stands because an update failed).
func (r *Runner) applyObject(ctx context.Context, p *planned, ao *applyObject, cur client.Object, adoptable bool) string {
	name := p.plugin.Name()
	body, err := withHash(ao.data)
	if err != nil {
		p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: %s: %w", name, ao.ref, err))
		return "could not be rendered"
	}
	var foreign map[string][]string
	if cur != nil {
		adopted := false
		if !plugin.IsManagedBy(cur.GetLabels(), name) {
			// Another of this library's plugins is never adopted from: that would make two
			// plugins fight over one object.
			if !adoptable || cur.GetLabels()[plugin.ManagedByLabel] == plugin.ManagedByValue {
				err := &ConflictError{Plugin: name, Ref: ao.ref, ManagedBy: managedBy(cur.GetLabels())}
				p.res.Errors = append(p.res.Errors, err)
				return "exists and was made by " + err.who()
			}
			adopted = true
			p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("adopted %s, which another writer made", ao.ref))
		}
		foreign = foreignSpecFieldsFor(cur, name, body)
		if len(foreign) == 0 && matches(cur, body) {
			p.res.Unchanged = append(p.res.Unchanged, ao.ref)
			return ""
		}
		if others := withoutManager(foreign, plugin.FieldManager(name)); len(others) > 0 && !adopted {
			p.res.Warnings = append(p.res.Warnings, fmt.Sprintf("%s was changed by another writer (%s); restoring the desired spec", ao.ref, describeForeign(others)))
		}
		if w := ownManagerWarning(ao.ref, cur, name, body, foreign); w != "" {
			p.res.Warnings = append(p.res.Warnings, w)
		}
		ao.restored = restoresDrift(cur, name, body, foreign)
		ao.rewritten = slices.Contains(p.desired.ReadyFromStatus, ao.ref)
	}
	restoreFailed := false
	if len(foreign) > 0 {
		restoreFailed = !r.restore(ctx, p, ao, cur, body)
	}
	wctx, warnings := collectWarnings(ctx)
	err = r.Client.Apply(wctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: body}),
		client.FieldOwner(plugin.FieldManager(name)), client.ForceOwnership)
	p.res.Warnings = append(p.res.Warnings, warnings()...)
	if err != nil {
		p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: applying %s: %w", name, ao.ref, err))
	}
	if err == nil {
		if cur == nil {
			p.res.Created = append(p.res.Created, ao.ref)
		} else {
			p.res.Updated = append(p.res.Updated, ao.ref)
		}
	}
	return afterWrite(cur, name, foreign, restoreFailed, ao.restored, err)
}

// afterWrite says why an object does not protect after the runner wrote it ("" when it does).
func afterWrite(cur client.Object, pluginName string, foreign map[string][]string, restoreFailed, restored bool, applyErr error) string {
	switch {
	case restoreFailed:
		return "was changed by another writer (" + describeForeign(foreign) + ") and restoring it failed"
	case applyErr == nil:
		return ""
	case cur == nil:
		return "does not exist and creating it failed"
	case len(foreign) > 0:
		return "" // restored to exactly the desired spec; only taking ownership back failed
	case restored:
		// A value changed under the plugin's own field manager: only the failed apply would undo it.
		return "was changed by a writer using the plugin's own field manager and restoring it failed"
	case plugin.IsManagedBy(cur.GetLabels(), pluginName):
		return "" // the earlier version of the plugin's own still protects
	}
	return "could not be taken over"
}

// restore replaces cur's spec by exactly the desired one. Server-side apply cannot do it: it
// never removes fields another manager owns, such as a selector or targetRefs added to a
// policy. An Update with cur's resourceVersion as precondition can, and it keeps the object in
// place throughout; deleting and re-creating it (with a UID precondition) would leave the
// namespace without the policy in between, and with no ALLOW policy ztunnel admits every caller.
// A stale resourceVersion fails with a conflict and the next reconcile tries again.
func (r *Runner) restore(ctx context.Context, p *planned, ao *applyObject, cur client.Object, body map[string]any) bool {
	u, err := restoredBody(cur, body)
	if err == nil {
		wctx, warnings := collectWarnings(ctx)
		err = r.Client.Update(wctx, u, client.FieldOwner(plugin.FieldManager(p.plugin.Name())))
		p.res.Warnings = append(p.res.Warnings, warnings()...)
	}
	if err != nil {
		p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: restoring %s: %w", p.plugin.Name(), ao.ref, err))
		return false
	}
	return true
}

// matches reports whether cur holds every field of the apply body with the same value.
func matches(cur client.Object, body map[string]any) bool {
	m, err := ssa.ToMap(cur)
	if err != nil {
		return false
	}
	same, _ := ssa.Contains(m, body, "")
	return same
}

// withHash returns a copy of the apply body carrying the desired-hash annotation.
func withHash(data map[string]any) (map[string]any, error) {
	u := (&unstructured.Unstructured{Object: data}).DeepCopy()
	h, err := ssa.DesiredHash(u.Object)
	if err != nil {
		return nil, err
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[plugin.DesiredHashAnnotation] = h
	u.SetAnnotations(ann)
	return u.Object, nil
}

func managedBy(labels map[string]string) string {
	if labels[plugin.ManagedByLabel] == "" {
		return ""
	}
	if labels[plugin.PluginLabel] != "" {
		return labels[plugin.ManagedByLabel] + " plugin " + labels[plugin.PluginLabel]
	}
	return labels[plugin.ManagedByLabel]
}

// withdrawEnrolment takes off, in one label write before any object changes, every enrolment
// label a plugin owns whose value is about to change or which it no longer wants, keeping every
// other label as it is. It reports false when that write failed: the labels then still route traffic.
func (r *Runner) withdrawEnrolment(ctx context.Context, plans []*planned, ns *corev1.Namespace, held holds, res *Result) bool {
	own := readLabelOwners(ns, pluginsOf(plans))
	if own.err != nil {
		return true // the label phase reports it, and writes no label
	}
	want := map[string]map[string]string{}
	for _, p := range plans {
		if keep, withdraw := withdrawal(p, ns, own, held); withdraw {
			want[p.plugin.Name()] = keep
		}
	}
	if len(want) == 0 {
		return true
	}
	if !r.writeLabels(ctx, ns, plans, want, res) {
		return false
	}
	// Later phases compare against the namespace as it is now. A cache may still show the
	// old labels; then phase 2 writes once more, which converges to the same state.
	if fresh := (&corev1.Namespace{}); r.reader().Get(ctx, client.ObjectKeyFromObject(ns), fresh) == nil {
		*ns = *fresh
	}
	return true
}

// withdrawal is the labels the plugin keeps while its enrolment labels that change or go are
// withdrawn, and whether there is any to withdraw. A shared label no plugin is named for counts as
// the plugin's own when it is one of the plugin's enrolment keys.
func withdrawal(p *planned, ns *corev1.Namespace, own labelOwners, held holds) (map[string]string, bool) {
	if p.failed || len(p.desired.Enrolment) == 0 {
		return nil, false
	}
	owned := own.owned(p.plugin.Name())
	keep := map[string]string{}
	for k := range owned {
		if v, ok := ns.Labels[k]; ok {
			keep[k] = v
		}
	}
	withdraw := false
	for _, k := range p.desired.Enrolment {
		want, wanted := p.desired.Labels[k]
		if (owned[k] || own.unattributed[k]) && (!wanted || want != ns.Labels[k]) && !held.holds(p.plugin.Name(), k) {
			delete(keep, k)
			withdraw = true
		}
	}
	return keep, withdraw
}

// prune deletes the plugin's observed objects that it no longer wants, except those that a held
// data-plane label requires or running pods depend on; with wait, it says what those wait for.
func (r *Runner) prune(ctx context.Context, p *planned, obs plugin.Observed, held holds, wait bool) {
	want := map[plugin.Ref]bool{}
	for _, o := range p.objects {
		want[o.ref] = true
	}
	for _, cur := range obs.Objects {
		if !plugin.IsManagedBy(cur.GetLabels(), p.plugin.Name()) {
			continue
		}
		// A kind listed as metadata only is read, never written (authz reads kfam's RoleBindings
		// so): whoever labelled such an object as the plugin's cannot make the runner delete it.
		if _, readOnly := cur.(*metav1.PartialObjectMetadata); readOnly {
			continue
		}
		ref := refOf(cur)
		if want[ref] {
			continue
		}
		if held.refs[ref] {
			if why := held.keeping(ref); why != "" && wait {
				p.res.Waiting = append(p.res.Waiting, why)
			}
			continue
		}
		uid := cur.GetUID()
		err := r.Client.Delete(ctx, cur, client.Preconditions{UID: &uid})
		if err != nil && !apierrors.IsNotFound(err) {
			p.res.Errors = append(p.res.Errors, fmt.Errorf("plugin %s: deleting %s: %w", p.plugin.Name(), ref, err))
			continue
		}
		p.res.Deleted = append(p.res.Deleted, ref)
	}
}
