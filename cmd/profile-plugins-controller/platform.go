package main

import (
	"context"
	"flag"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// DefaultPlatformInterval is how often the platform check runs when nothing it watches changes:
// pods of the platform callers are not watched (that would cache every Pod of the cluster), so a
// caller whose pods restart onto another data plane is seen at the next interval.
const DefaultPlatformInterval = 5 * time.Minute

// platformInterval is a flag of its own here, so that main.go only gains the call that wires the check.
var platformInterval = flag.Duration("platform-check-interval", DefaultPlatformInterval,
	"how often the platform check runs besides the changes it watches (the platform callers' pods are not watched)")

// PlatformReason is the reason of the events the platform check records.
const PlatformReason = "PlatformFinding"

// platformRequest is the one request the platform check's queue ever holds: every trigger
// collapses into it, so the check never runs twice at once.
var platformRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "platform"}}

// PlatformCheck runs platform.Check at start, when a watched input changes, and
// every Interval, and reports each finding once when it appears: an event on the Namespace the
// finding is about (kubectl describe namespace kubeflow shows it), a log line, and the gauge
// profile_plugins_platform_findings by kind. A resolved finding is logged too.
type PlatformCheck struct {
	// Reader reads the API server directly (the manager's APIReader): the check lists Pods by
	// spec.serviceAccountName in a few namespaces, which no cache of this controller holds.
	Reader   client.Reader
	Config   *config.Config
	Recorder events.EventRecorder
	Findings *prometheus.GaugeVec
	Interval time.Duration

	mu         sync.Mutex
	reported   map[string]platform.Finding
	notChecked string
}

// NewPlatformFindings creates the gauge of current platform findings by kind and registers it.
func NewPlatformFindings(reg prometheus.Registerer) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "profile_plugins_platform_findings",
		Help: "Current findings of the platform check by kind (DataPlaneMismatch, CallerNotInMesh, ...).",
	}, []string{"kind"})
	reg.MustRegister(g)
	return g
}

// Reconcile implements reconcile.Reconciler: it runs the check and asks to run again after Interval.
func (p *PlatformCheck) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	report, err := platform.Check(ctx, p.Reader, p.Config)
	if err != nil {
		return ctrl.Result{}, err
	}
	p.publish(ctx, report)
	return ctrl.Result{RequeueAfter: p.interval()}, nil
}

func (p *PlatformCheck) interval() time.Duration {
	if p.Interval > 0 {
		return p.Interval
	}
	return DefaultPlatformInterval
}

// publish sets the gauge and says what is new and what is gone since the last check.
func (p *PlatformCheck) publish(ctx context.Context, report platform.Report) {
	logger := log.FromContext(ctx)
	counts := map[platform.FindingKind]int{}
	now := map[string]platform.Finding{}
	for _, f := range report.Findings {
		counts[f.Kind]++
		now[f.String()] = f
	}
	if p.Findings != nil {
		for _, k := range platform.FindingKinds() {
			p.Findings.WithLabelValues(string(k)).Set(float64(counts[k]))
		}
	}
	p.mu.Lock()
	before := p.reported
	p.reported = now
	notChecked := strings.Join(report.NotChecked, "; ")
	notCheckedChanged := notChecked != p.notChecked
	p.notChecked = notChecked
	p.mu.Unlock()
	if notCheckedChanged && notChecked != "" {
		logger.Info("platform check: not checked", "what", report.NotChecked)
	}
	for key, f := range now {
		if _, seen := before[key]; seen {
			continue
		}
		logger.Info("platform finding", "kind", f.Kind, "what", f.What, "subject", f.Subject(), "problem", f.Problem, "fix", f.Fix)
		if p.Recorder != nil {
			p.Recorder.Eventf(regarding(f), nil, corev1.EventTypeWarning, PlatformReason, string(f.Kind), "%s", f.String())
		}
	}
	for key, f := range before {
		if _, still := now[key]; !still {
			logger.Info("platform finding resolved", "kind", f.Kind, "what", f.What, "subject", f.Subject())
		}
	}
}

// setupPlatformCheck runs check in the manager, triggered by:
//   - the start (a source that enqueues once);
//   - changes of the Namespaces the check reads (the callers', the ingress gateway's, istiod's),
//     from the Namespace informer the manager already has for Owns(&corev1.Namespace{});
//   - changes of the waypoint class defaults, through a cache of its own that holds only the
//     metadata of the ConfigMaps labelled for the class in istiod's namespace: no cluster-wide
//     ConfigMap informer, and nothing added to the manager's cache options;
//   - RequeueAfter: check.Interval, for what is not watched (the callers' pods).
func setupPlatformCheck(mgr ctrl.Manager, check *PlatformCheck) error {
	cfg := check.Config
	classDefaults, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{cfg.Mesh.IstiodNamespace: {}},
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{waypoint.ClassDefaultsLabel: cfg.Mesh.Waypoint.ClassName}),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(classDefaults); err != nil {
		return err
	}
	configMaps := &metav1.PartialObjectMetadata{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	always := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{platformRequest}
	})
	read := platformNamespaces(cfg)
	return ctrl.NewControllerManagedBy(mgr).
		Named("platform-check").
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(platformRequest)
			return nil
		})).
		WatchesRawSource(source.Kind(classDefaults, client.Object(configMaps), always)).
		Watches(&corev1.Namespace{}, always, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return read.Has(o.GetName())
		}))).
		Complete(check)
}

// platformNamespaces are the namespaces CheckPlatform reads: istiod's, the ingress gateway's,
// every platform caller's and every L4 exception's (by namespace, principal or service account).
func platformNamespaces(cfg *config.Config) sets.Set[string] {
	out := sets.New(cfg.Mesh.IstiodNamespace, principalNamespace(cfg.Authorization.Principals.IngressGateway))
	for _, c := range cfg.Authorization.PlatformCallers {
		out.Insert(principalNamespace(c.Principal))
	}
	for _, e := range cfg.Authorization.L4Exceptions {
		out.Insert(e.Namespaces...)
		for _, p := range e.Principals {
			out.Insert(principalNamespace(p))
		}
		for _, sa := range e.ServiceAccounts {
			ns, _, _ := strings.Cut(sa, "/")
			out.Insert(ns)
		}
	}
	out.Delete("")
	return out
}

// principalNamespace is the <namespace> of <trust domain>/ns/<namespace>/sa/<name>, "" when the
// principal does not parse (validation has refused such a configuration already).
func principalNamespace(principal string) string {
	_, ns, _, err := config.ParsePrincipal(principal)
	if err != nil {
		return ""
	}
	return ns
}

// regarding is the object a finding's event is about: the Namespace it names, or, for the
// cluster-wide guard, its policy (the event then lands in namespace default).
func regarding(f platform.Finding) runtime.Object {
	if f.Namespace == "" {
		return &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.Policy}}
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
}
