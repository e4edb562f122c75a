package dryrun

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeflow-ambient/profile-plugins/internal/ssa"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Write is one write a dry run sent, with what the API server answered. The server ran
// admission, validation and defaulting on it, as for a real write, and persisted nothing.
type Write struct {
	// Plugin is the plugin that wrote, from its field manager or the object's PluginLabel; empty
	// for the namespace-label write, which carries every plugin's labels (each PluginResult
	// lists its own in LabelsSet and LabelsRemoved).
	Plugin string
	// Verb is apply, create, update, patch or delete.
	Verb string
	GVK  schema.GroupVersionKind
	// Namespace is empty for cluster-scoped objects (the Namespace itself).
	Namespace, Name string
	// Before is the object as the run saw it before this write, earlier dry-run writes of the
	// same run included; nil when it did not exist. After is the object as the run sees it after
	// this write; nil for a delete, and for a write that took the last finalizer off an object
	// being deleted (which deletes it). It is the server's answer, except that the server answers
	// every dry run against the persisted object, so when the run wrote the same object before
	// (the namespace: one label apply per phase), the labels and field managers those
	// earlier writes changed are composed in, as the real writes would compose.
	Before, After *unstructured.Unstructured
}

// Ref names the written object as a runner Result names objects.
func (w Write) Ref() plugin.Ref { return plugin.Ref{GroupKind: w.GVK.GroupKind(), Name: w.Name} }

// Client sends every write with dryRun=All and keeps the server's answers as an overlay on the
// reads that follow, so a later phase of the same run (the label phase after the withdraw phase
// re-reads the namespace) decides exactly as it would after the real writes. Hand it to a runner
// as its Client (and Reader); [Client.Writes] then lists what the run would have written.
type Client struct {
	// Client is controller-runtime's dry-run client, so a write this type does not intercept
	// (a subresource, DeleteAllOf) is still never persisted.
	client.Client
	reader client.Reader

	mu     sync.Mutex
	state  map[objectKey]*unstructured.Unstructured // nil: deleted in this run
	writes []Write
	// answers are the server's answers per object, in order, for composing (see compose).
	answers map[objectKey][]*unstructured.Unstructured
	base    map[objectKey]*unstructured.Unstructured // as persisted, before the first write
	// replaced marks objects the run wrote whole (create, update): a later apply's answer,
	// computed against the persisted object, misses that write.
	replaced map[objectKey]bool
}

type objectKey struct {
	gvk             schema.GroupVersionKind
	namespace, name string
}

// NewClient returns a Client that writes through c as server-side dry runs and reads through
// reader (c itself when nil), overlaid with the answers of the run's own writes.
func NewClient(c client.Client, reader client.Reader) *Client {
	if reader == nil {
		reader = c
	}
	return &Client{Client: client.NewDryRunClient(c), reader: reader, state: map[objectKey]*unstructured.Unstructured{},
		answers: map[objectKey][]*unstructured.Unstructured{}, base: map[objectKey]*unstructured.Unstructured{},
		replaced: map[objectKey]bool{}}
}

// Writes lists the writes sent so far, in order, with the server's answers.
func (d *Client) Writes() []Write {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Write(nil), d.writes...)
}

// Apply sends the apply configuration as unstructured, so the answer (managedFields included) is
// decoded whole; a typed apply configuration would drop what it has no field for.
func (d *Client) Apply(ctx context.Context, ac runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	u, err := applyConfigurationObject(ac)
	if err != nil {
		return err
	}
	key := objectKey{u.GroupVersionKind(), u.GetNamespace(), u.GetName()}
	before, err := d.current(ctx, key)
	if err != nil {
		return err
	}
	request := u.DeepCopy()
	if err := d.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return err
	}
	o := (&client.ApplyOptions{}).ApplyOptions(opts)
	d.record("apply", key, fieldManagerPlugin(o.FieldManager), before, u, request)
	return nil
}

func (d *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	o := (&client.CreateOptions{}).ApplyOptions(opts)
	return d.write(ctx, "create", obj, o.FieldManager, func() error { return d.Client.Create(ctx, obj, opts...) })
}

func (d *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	o := (&client.UpdateOptions{}).ApplyOptions(opts)
	return d.write(ctx, "update", obj, o.FieldManager, func() error { return d.Client.Update(ctx, obj, opts...) })
}

func (d *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	o := (&client.PatchOptions{}).ApplyOptions(opts)
	return d.write(ctx, "patch", obj, o.FieldManager, func() error { return d.Client.Patch(ctx, obj, patch, opts...) })
}

func (d *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return d.write(ctx, "delete", obj, "", func() error { return d.Client.Delete(ctx, obj, opts...) })
}

// write sends one typed write and records the answer decoded into obj.
func (d *Client) write(ctx context.Context, verb string, obj client.Object, manager string, send func() error) error {
	key, err := d.keyOf(obj)
	if err != nil {
		return err
	}
	before, err := d.current(ctx, key)
	if err != nil {
		return err
	}
	if err := send(); err != nil {
		return err
	}
	pluginName := fieldManagerPlugin(manager)
	if pluginName == "" {
		pluginName = obj.GetLabels()[plugin.PluginLabel]
	}
	var after *unstructured.Unstructured
	if verb != "delete" {
		if after, err = toUnstructured(obj, key.gvk); err != nil {
			return err
		}
		if d.deletedInRun(key) || after.GetDeletionTimestamp() != nil {
			if len(after.GetFinalizers()) == 0 {
				// The write took the last finalizer off an object being deleted (by this run's
				// delete, which the server answered against the persisted object): the server
				// deletes it, though it answers with the object.
				after = nil
			}
		}
	}
	d.record(verb, key, pluginName, before, after, nil)
	return nil
}

// deletedInRun reports whether this run deleted the object.
func (d *Client) deletedInRun(key objectKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, seen := d.state[key]
	return seen && st == nil
}

// record keeps the write and what the run sees of the object after it. request is the body of an
// apply, nil for other writes.
func (d *Client) record(verb string, key objectKey, pluginName string, before, after, request *unstructured.Unstructured) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, seen := d.base[key]; !seen {
		d.base[key] = before
	}
	switch {
	case after == nil:
	case d.replaced[key] && request != nil && before != nil:
		// The run replaced the whole object earlier (a restoring Update), which the server does
		// not know when it answers this apply: apply the body onto what the run wrote.
		after = applyOnto(before, request, after)
	default:
		d.answers[key] = append(d.answers[key], after.DeepCopy())
		after = compose(d.base[key], d.answers[key])
	}
	if verb == "update" || verb == "create" {
		d.replaced[key] = true
	}
	d.state[key] = after
	d.writes = append(d.writes, Write{Plugin: pluginName, Verb: verb, GVK: key.gvk, Namespace: key.namespace, Name: key.name,
		Before: before, After: after.DeepCopy()})
}

// compose is the last answer with the labels and managedFields entries every earlier answer
// changed from base put back, in write order: the server answered each against base, so the
// last answer alone lacks what the run's earlier writes (by other field managers) did.
func compose(base *unstructured.Unstructured, answers []*unstructured.Unstructured) *unstructured.Unstructured {
	last := answers[len(answers)-1].DeepCopy()
	if base == nil || len(answers) == 1 {
		return last
	}
	labels := maps.Clone(base.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	managers := map[managerKey]*metav1.ManagedFieldsEntry{}
	for _, e := range base.GetManagedFields() {
		managers[keyOfEntry(e)] = &e
	}
	baseManagers := maps.Clone(managers)
	removed := map[string]string{}
	for _, a := range answers {
		applyLabelDelta(labels, base.GetLabels(), a.GetLabels(), removed)
		applyManagerDelta(managers, baseManagers, a.GetManagedFields())
	}
	// The server removes a label when its writer lets go of it and nobody else owns it in the
	// persisted object. A label that a manager of the run's result still owns stays: the release
	// of an earlier version's per-plugin label manager after the shared label apply took its
	// labels over (see releaseLegacy).
	for k, v := range removed {
		if _, kept := labels[k]; !kept && labelOwned(managers, k) {
			labels[k] = v
		}
	}
	if len(labels) == 0 {
		labels = nil
	}
	last.SetLabels(labels)
	last.SetManagedFields(sortedEntries(managers))
	return last
}

// applyOnto is cur with the apply body's fields set, as server-side apply leaves an object whose
// every field the body names already belongs to the run's own whole write: maps merge, lists and
// values are the body's (the lists the runner applies are atomic). Server-kept metadata (managed
// fields, resourceVersion) comes from the server's answer.
func applyOnto(cur, body, answer *unstructured.Unstructured) *unstructured.Unstructured {
	out := cur.DeepCopy()
	mergeInto(out.Object, body.DeepCopy().Object)
	out.SetManagedFields(answer.GetManagedFields())
	out.SetResourceVersion(answer.GetResourceVersion())
	return out
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeInto(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// applyLabelDelta applies to labels what answer changed from base, recording in removed the value
// of each label it removes.
func applyLabelDelta(labels, base, answer map[string]string, removed map[string]string) {
	for k, v := range answer {
		if bv, ok := base[k]; !ok || bv != v {
			labels[k] = v
		}
	}
	for k := range base {
		if _, ok := answer[k]; !ok {
			if v, ok := labels[k]; ok {
				removed[k] = v
			}
			delete(labels, k)
		}
	}
}

// labelOwned reports whether one of the entries owns the label key.
func labelOwned(managers map[managerKey]*metav1.ManagedFieldsEntry, key string) bool {
	for _, e := range managers {
		if e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		if labels, _, err := ssa.ManagedLabelKeys(*e); err == nil && slices.Contains(labels, key) {
			return true
		}
	}
	return false
}

type managerKey struct{ manager, operation, subresource string }

func keyOfEntry(e metav1.ManagedFieldsEntry) managerKey {
	return managerKey{e.Manager, string(e.Operation), e.Subresource}
}

// applyManagerDelta takes into managers every entry that answer changed (or removed) from base.
func applyManagerDelta(managers, base map[managerKey]*metav1.ManagedFieldsEntry, answer []metav1.ManagedFieldsEntry) {
	inAnswer := map[managerKey]bool{}
	for _, e := range answer {
		k := keyOfEntry(e)
		inAnswer[k] = true
		if b, ok := base[k]; !ok || !equality.Semantic.DeepEqual(*b, e) {
			managers[k] = &e
		}
	}
	for k := range base {
		if !inAnswer[k] {
			delete(managers, k)
		}
	}
}

func sortedEntries(managers map[managerKey]*metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	keys := slices.SortedFunc(maps.Keys(managers), func(a, b managerKey) int {
		return strings.Compare(a.manager+"\x00"+a.operation+"\x00"+a.subresource, b.manager+"\x00"+b.operation+"\x00"+b.subresource)
	})
	out := make([]metav1.ManagedFieldsEntry, 0, len(keys))
	for _, k := range keys {
		out = append(out, *managers[k])
	}
	return out
}

// current is the object as this run sees it: the last dry-run answer, or the cluster's.
func (d *Client) current(ctx context.Context, key objectKey) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(key.gvk)
	err := d.Get(ctx, client.ObjectKey{Namespace: key.namespace, Name: key.name}, u)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// Get reads through the overlay of this run's dry-run answers.
func (d *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, err := d.keyOf(obj)
	if err != nil {
		return err
	}
	k.namespace, k.name = key.Namespace, key.Name
	d.mu.Lock()
	u, written := d.state[k]
	d.mu.Unlock()
	if !written {
		return d.reader.Get(ctx, key, obj, opts...)
	}
	if u == nil {
		return apierrors.NewNotFound(schema.GroupResource{Group: k.gvk.Group, Resource: k.gvk.Kind}, key.Name)
	}
	return fromUnstructured(u, obj)
}

// List reads through the overlay: written objects replace or join the listed ones, deleted ones
// leave.
func (d *Client) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := d.reader.List(ctx, list, opts...); err != nil {
		return err
	}
	gvk, err := apiutil.GVKForObject(list, d.Scheme())
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	o := (&client.ListOptions{}).ApplyOptions(opts)
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.touches(gvk, o.Namespace) {
		return nil
	}
	return d.mergeList(list, gvk, o)
}

func (d *Client) touches(gvk schema.GroupVersionKind, namespace string) bool {
	for k := range d.state {
		if k.gvk == gvk && (namespace == "" || k.namespace == namespace) {
			return true
		}
	}
	return false
}

func (d *Client) mergeList(list client.ObjectList, gvk schema.GroupVersionKind, o *client.ListOptions) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	seen := map[objectKey]bool{}
	var out []runtime.Object
	for _, it := range items {
		obj := it.(client.Object)
		k := objectKey{gvk, obj.GetNamespace(), obj.GetName()}
		seen[k] = true
		u, written := d.state[k]
		switch {
		case !written:
			out = append(out, it)
		case u != nil && d.selected(u, o):
			if err := fromUnstructured(u, obj); err != nil {
				return err
			}
			out = append(out, obj)
		}
	}
	for k, u := range d.state {
		if seen[k] || u == nil || k.gvk != gvk || (o.Namespace != "" && k.namespace != o.Namespace) || !d.selected(u, o) {
			continue
		}
		obj, err := newItem(list, d.Scheme(), gvk)
		if err != nil {
			return err
		}
		if err := fromUnstructured(u, obj); err != nil {
			return err
		}
		out = append(out, obj)
	}
	return meta.SetList(list, out)
}

func (d *Client) selected(u *unstructured.Unstructured, o *client.ListOptions) bool {
	return o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(u.GetLabels()))
}

// newItem makes an empty item of the list's element type.
func newItem(list client.ObjectList, s *runtime.Scheme, gvk schema.GroupVersionKind) (client.Object, error) {
	if _, ok := list.(*unstructured.UnstructuredList); ok {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	}
	obj, err := s.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("dry run: list of %s: %w", gvk.Kind, err)
	}
	return obj.(client.Object), nil
}

func (d *Client) keyOf(obj client.Object) (objectKey, error) {
	gvk, err := apiutil.GVKForObject(obj, d.Scheme())
	if err != nil {
		return objectKey{}, err
	}
	return objectKey{gvk, obj.GetNamespace(), obj.GetName()}, nil
}

// applyConfigurationObject is the JSON form of an apply configuration (typed or unstructured).
func applyConfigurationObject(ac runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return nil, fmt.Errorf("dry run: encoding the apply configuration: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("dry run: decoding the apply configuration: %w", err)
	}
	return u, nil
}

// toUnstructured goes through JSON, as toMap does, for Istio's protobuf specs.
func toUnstructured(obj client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := ssa.ToMap(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// fromUnstructured replaces obj's content with u's.
func fromUnstructured(u *unstructured.Unstructured, obj client.Object) error {
	if out, ok := obj.(*unstructured.Unstructured); ok {
		out.Object = u.DeepCopy().Object
		return nil
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
	return json.Unmarshal(data, obj)
}

// fieldManagerPlugin is the plugin name of one of the runner's field managers, or "".
func fieldManagerPlugin(manager string) string {
	name, _ := strings.CutPrefix(manager, plugin.FieldManagerPrefix)
	if name == manager {
		return ""
	}
	return name
}

// Apply runs r.Apply for profile with every write a dry run, on a copy of r that reads through a
// fresh Client, and returns its Result with the writes the run would have made.
func Apply(ctx context.Context, r *runner.Runner, profile *profilev1.Profile) (*runner.Result, []Write) {
	return run(ctx, r, (*runner.Runner).Apply, profile)
}

// Revoke is Apply for r.Revoke.
func Revoke(ctx context.Context, r *runner.Runner, profile *profilev1.Profile) (*runner.Result, []Write) {
	return run(ctx, r, (*runner.Runner).Revoke, profile)
}

func run(ctx context.Context, r *runner.Runner, call func(*runner.Runner, context.Context, *profilev1.Profile) *runner.Result,
	profile *profilev1.Profile) (*runner.Result, []Write) {
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	d := NewClient(r.Client, reader)
	c := *r
	c.Client, c.Reader = d, d
	res := call(&c, ctx, profile)
	return res, d.Writes()
}
