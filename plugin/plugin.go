package plugin

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// Plugin generates what one concern (the waypoint, the access policies, Pod Security) wants in a
// user namespace.
type Plugin interface {
	// Name identifies the plugin. It names the field manager and the value of [PluginLabel], so it
	// must be a DNS-1123 label and must never change: objects made under an old name are orphaned.
	Name() string
	// Kinds lists, as empty lists (such as &gatewayv1.GatewayList{}), every object type the plugin
	// may emit in any configuration, so the runner can find and prune objects from an earlier
	// configuration even when the plugin now emits none of that type. A kind the plugin only
	// reads is listed as a metav1.PartialObjectMetadataList: the runner observes it as metadata
	// and never prunes it.
	Kinds() []client.ObjectList
	// Generate returns what the plugin wants for t. It must be deterministic and must not call
	// the API server: everything it may depend on is in t.
	Generate(t Target) (Desired, error)
}

// PodObserver is implemented by plugins whose output depends on the pods running in the namespace
// (Pod Security preflight, pods left with a sidecar). The runner lists pods only when one of its
// plugins returns true (or is a DataPlane), and with Runner.APIReader only in the calls where
// PodDemand asks for them.
type PodObserver interface {
	NeedsPods() bool
}

// PodDemand is implemented by PodObservers that can tell whether their decisions in one call depend
// on the pods. With Runner.APIReader set, the runner first generates without pods and lists them,
// from the API server and in that namespace only, when one plugin asks for them (or a data-plane
// label or pod-protecting object may go, see DataPlane and PodProtector); it then generates again.
// A PodObserver without this method gets the pods on every call. A report the API server gives
// itself on the call's writes (Pod Security's check of existing pods, see WithWarnings) needs none.
type PodDemand interface {
	// NeedsPodsFor says whether the plugin's decisions for t depend on the running pods, given d,
	// what it generated for t without pods (t.Observed.Pods is nil).
	NeedsPodsFor(t Target, d Desired) bool
}

// DataPlane is implemented by plugins whose namespace labels put running pods into a data plane
// (istio.io/dataplane-mode=ambient). Taking such a label away leaves the pods it captured outside
// every data plane, with no mTLS and no policy at all, so the runner keeps a data-plane label the
// plugin owns, and the objects it requires, while Captured names a pod: after a mode switch, when
// a requirement is lost, and on Revoke.
type DataPlane interface {
	// DataPlaneLabels maps each data-plane label key to the objects that protect the pods it
	// captures (for dataplane-mode, the ztunnel policy). It must not depend on the mode.
	DataPlaneLabels() map[string][]Ref
	// Captured names the running pods that the namespace label key=value puts in a data plane
	// and that no other data plane would take if it went away.
	Captured(key, value string, pods []corev1.Pod) []string
}

// PodProtector is implemented by plugins that know which objects protect running pods whatever
// the mode and the namespace labels: a selector-less owner policy is the only ALLOW policy of a pod
// that runs a sidecar, and with no ALLOW policy that pod admits every caller. The runner never
// prunes such an object while it names a pod (after a switch to mode none, on Revoke) and says
// what it waits for.
type PodProtector interface {
	// ProtectedPods maps objects in obs to the running pods that depend on them.
	ProtectedPods(obs Observed) map[Ref][]string
}

// AdmissionGuard is implemented by plugins whose namespace labels decide what the API server
// admits into the namespace (Pod Security: a namespace without an enforce label admits privileged
// pods). Revoke never takes such a label off: a namespace that goes away keeps it until it is
// gone, and one that outlives its Profile keeps it for good, since whoever the RoleBindings that
// survive the Profile name may still create pods there (see runner.Runner.Revoke).
type AdmissionGuard interface {
	// AdmissionLabels lists the namespace label keys that constrain admission.
	AdmissionLabels() []string
}

// Target is one user namespace as a plugin sees it.
type Target struct {
	// Namespace is the user namespace; it has the Profile's name.
	Namespace string
	// Owner is the Profile's owner name (an e-mail for a person). It is user input.
	Owner string
	// Profile is the whole Profile, for plugins that read spec.plugins. It is user input.
	Profile *profilev1.Profile
	// Observed is the current state, read by the runner before generation.
	Observed Observed
}

// Observed is the cluster state the runner read for a namespace before generating.
type Observed struct {
	// Labels are the namespace's labels now, from every writer.
	Labels map[string]string
	// LabelManagers names, for each label key, the field managers that own it (from the
	// namespace's managedFields), so a plugin can tell its own value from another writer's. A
	// label the runner owns for a plugin (under LabelFieldManager) is named by that plugin's
	// FieldManager, as if the plugin had written it alone.
	LabelManagers map[string][]string
	// Objects are the objects of every plugin's Kinds in the namespace, made by anyone,
	// status included. One that carries the managed labels without the Profile as its
	// controller is another writer's, and the runner shows it without those labels.
	Objects []client.Object
	// Pods are the namespace's pods, listed only when a plugin is a PodObserver or a DataPlane,
	// and with Runner.APIReader only when a decision of the call needs them (see PodDemand);
	// nil otherwise.
	Pods []corev1.Pod
	// Held are the data-plane labels (key to value) that the runner keeps on the namespace in this
	// call whatever the plugins want, because running pods depend on them (see DataPlane). A plugin
	// that makes an object such a label requires keeps making it while the label is held, so the
	// object stays intact until the label goes.
	Held map[string]string
	// EndpointSlices are the namespace's EndpointSlices (discovery.k8s.io/v1), listed only when a
	// plugin is an EndpointObserver that asks for them, and possibly trimmed (see
	// runner.EndpointSliceTransform): of each only its name, its labels discoveryv1.LabelManagedBy
	// and the observers' EndpointSliceLabels, and whether it is [Serving] are certain. nil otherwise.
	EndpointSlices []discoveryv1.EndpointSlice
	// Now is when the runner observed, the one clock a plugin may read: decisions that depend on
	// time (how long a namespace has been idle) take it from here, so that Generate stays a
	// function of its input. The zero time means unknown, and such a plugin keeps what stands.
	Now time.Time
}

// EndpointObserver is implemented by plugins whose output depends on whether the namespace serves
// anything: the waypoint with mesh.waypoint.provision onDemand. The runner lists the namespace's
// EndpointSlices, through its Reader, only when NeedsEndpointSlices is true.
type EndpointObserver interface {
	NeedsEndpointSlices() bool
	// EndpointSliceLabels are the label keys of an EndpointSlice the plugin reads. A cache that
	// trims EndpointSlices (runner.CacheByObject given the plugin) keeps these,
	// discoveryv1.LabelServiceName and discoveryv1.LabelManagedBy ([Serving] reads it), and drops
	// every other label: the EndpointSlice controller copies a Service's labels onto its slices,
	// and whoever writes the Service chooses them.
	EndpointSliceLabels() []string
}

// Lookup returns the observed object of type T named name, if there is one.
func Lookup[T client.Object](o Observed, name string) (T, bool) {
	for _, obj := range o.Objects {
		if t, ok := obj.(T); ok && obj.GetName() == name {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// Desired is what a plugin wants in one namespace.
type Desired struct {
	// Objects are typed objects (istio client-go, gateway-api, core), all in the target namespace.
	// The runner adds the managed labels and the owner reference.
	Objects []client.Object
	// Labels are the namespace labels the plugin owns; a key it owned before and no longer lists is
	// removed, unless another writer also set it.
	Labels map[string]string
	// LabelRequires gates labels: a label key here is set, and kept, only while every listed
	// object exists, carries its plugin's labels and is intact (see the package doc's safety
	// model). Objects of other plugins may be named.
	LabelRequires map[string][]Ref
	// ReadyFromStatus lists objects whose readiness the plugin judged from their observed status
	// (a Gateway Programmed for its generation). When the runner writes a change to one in this
	// call, that status describes the version before the write, so every label requiring it,
	// except a data-plane label, waits for the next call, as for an object restored from drift.
	ReadyFromStatus []Ref
	// Enrolment lists label keys that send traffic somewhere or enrol the namespace in a data
	// plane (istio.io/use-waypoint, istio.io/dataplane-mode). When the plugin owns one of them
	// and is about to remove it or change its value, the runner takes it off before any object
	// changes, so traffic never follows a label to policies that are being rewritten. List them
	// in every mode, wanted or not.
	Enrolment []string
	// Adopt names objects the plugin may take over when another writer made them under the
	// name the plugin wants (for example the contributor policies kfam wrote before). Any other
	// foreign object with a wanted name is a ConflictError and is left alone. Because another
	// writer may also create and delete these names, the runner never brings one back that went
	// since it read it (its update names the UID it read), and before it creates one it reads
	// the kinds the plugin only reads (metadata lists) from the API server and generates again.
	Adopt []Ref
	// CreateRequires gates creation: an object listed here is created only once every object it
	// names protects (exists, carries its plugin's labels and is intact, after the writes of the
	// plugins and objects before it). An object that already exists is kept up to date as usual.
	// The waypoint Gateway requires the owner policy so: a waypoint without it would pass every
	// request a labelled Service sends it.
	CreateRequires map[Ref][]Ref
	// Waiting says why the plugin is not yet in its final state (for example "waiting for waypoint
	// ..."); a non-empty list makes the Result ask for a requeue.
	Waiting []string
	// Notes say how the plugin's state reads when it waits for nothing (for example "waypoint
	// idle since ..."): they go in the Result, the Profile condition's message and plan, and ask
	// for no requeue.
	Notes []string
	// RequeueAfter, when positive, is how soon the plugin's decision changes by itself, with no
	// event to trigger a reconcile (an idle waypoint's deadline): the Result asks for a requeue
	// no later than that.
	RequeueAfter time.Duration
	// Warnings are things an admin should know that do not stop the plugin.
	Warnings []string
	// Errors are problems the plugin answered by falling back to a safe state, such as a Profile
	// that asks for a level it may not have. The desired state is still applied; the errors are
	// reported like any other (Result.Err, a False condition). Return an error from Generate
	// instead when nothing safe can be applied.
	Errors []error
}

// Ref names one object in the target namespace.
type Ref struct {
	schema.GroupKind
	Name string
}

// String formats a Ref as Kind.group/name (Kind/name for the core group).
func (r Ref) String() string {
	return r.GroupKind.String() + "/" + r.Name
}
