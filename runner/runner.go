package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// DefaultWaitRequeue is how soon a waiting namespace is reconciled again when Runner.WaitRequeue
// is zero. Controllers should also watch the objects waited for; this is the fallback, which a
// controller may space out while the wait is one such a watch ends.
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
	//     other writers (this module's access plugin: AuthorizationPolicies, whose allow-all
	//     policies it warns about and contributor policies it adopts, and RoleBindings, as
	//     metadata, marked with annotations only, which no selector selects);
	//   - of the other Kinds (this module's: ConfigMap, Gateway), every object without an
	//     APIReader. With an APIReader it may show only the plugins' own (a cache.ByObject label
	//     selector of plugin.ManagedSelector, as a plugin.CacheDeclarer declares it): a wanted
	//     object it does not show is read from APIReader before anything is written, so another
	//     writer's object with a wanted name is still a ConflictError; a kind listed in
	//     FullyCached is not read so;
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
	// Trimmed lists the kinds of which the Reader shows trimmed objects: a cache Transform keeps
	// only part of each (CacheByObject's keeps of a ConfigMap its name, UID, the managed labels and
	// the controller reference, so that other writers' ConfigMaps cannot fill the controller's
	// memory). A wanted object of such a kind is read in full from APIReader in every Apply: its
	// content and managedFields decide whether it is intact. One no plugin wants is judged by its
	// labels and controller alone, which is all that pruning it takes. A Runner with Trimmed kinds
	// and no APIReader refuses to apply. [WithManager] derives it from the manager's cache options.
	Trimmed []schema.GroupKind
	// Plugins run in this order within each phase.
	Plugins []plugin.Plugin
	// WaitRequeue is the requeue delay while a plugin waits; zero means DefaultWaitRequeue.
	WaitRequeue time.Duration
	// Now is the clock plugins read through plugin.Observed.Now (how long a namespace has been
	// idle); nil means time.Now. Tests set it to move time without waiting.
	Now func() time.Time
	// Namespaces decides which namespaces are the Profile's to write into; the zero value is
	// the default rule and refuses ownership.AlwaysReserved.
	Namespaces ownership.Policy

	// optionErr is what an Option found wrong, which New returns.
	optionErr error
}

// NewRunner checks the plugins' names and returns a Runner that reads and writes through c.
func NewRunner(c client.Client, plugins ...plugin.Plugin) (*Runner, error) {
	return New(c, plugins)
}

// New checks the plugins' names and returns a Runner that reads and writes through c, configured
// by opts in order. It returns the error of an option that cannot hold for these plugins, such as
// [WithManager] with cache options that drop an EndpointSlice label a plugin reads.
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
	if r.optionErr != nil {
		return nil, r.optionErr
	}
	return r, nil
}

func (r *Runner) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// Apply brings the Profile's namespace to what the plugins want, in the phases of the package
// doc, each in the file named after it: admit, observe, generate, plan, then the writes (withdraw
// the enrolment labels that change, objects, labels, each gated on the protection it requires),
// and prune. Errors of one object or plugin are recorded in the Result and do not stop the
// others; only a failure to admit, observe or generate stops the call.
func (r *Runner) Apply(ctx context.Context, profile *profilev1.Profile) *Result {
	res := r.newResult()
	if !r.admitApply(ctx, profile, res) {
		return res
	}
	cl := claims{}
	ns, obs, notServed, err := r.observe(ctx, profile, cl)
	if errors.Is(err, ErrNamespaceNotFound) {
		// No namespace is made for a Profile without an owner (see checkProfile): say why,
		// rather than wait for one.
		err = errors.Join(err, checkProfile(profile))
	}
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}
	plans, obs, held, err := r.generate(ctx, res, profile, ns, obs, notServed, cl)
	r.warnClaims(res, profile, cl)
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}
	ap := plan(ns, obs, held, plans, cl)

	// Enrolment labels that change come off before the objects they send traffic to change. When
	// that write fails, the labels still route to the objects as they are: the object phase then
	// only creates missing objects, and nothing is pruned, until a later call has withdrawn them.
	withdrawn := r.withdrawEnrolment(ctx, ap, res)
	// Objects protect before any label enrols the namespace; labels are gated on what protects
	// after the object phase, and go out in one write for every plugin.
	r.writeObjects(ctx, ap, withdrawn)
	r.writeLabels(ctx, ap.ns, ap.plans, wantedLabels(ap), res)
	// Protection comes down last; what is being deleted goes once no pod depends on it.
	if withdrawn {
		r.pruneStale(ctx, ap)
	}
	r.releaseProtection(ctx, ap.ns, ap.plans, ap.obs, "")
	return res
}
