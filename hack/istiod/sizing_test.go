package istiod

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// sizing is one waypoint sizing the configuration offers and what istiod must make of it.
type sizing struct {
	name     string
	waypoint string // YAML under mesh.waypoint
	labels   map[string]string
	plugins  []profilev1.Plugin
	replicas int32
	cpu      string // istio-proxy's CPU request
	hpa      *[2]int32
	pdb      bool // a budget of maxUnavailable 1
	spread   bool
	params   bool // the Gateway references the namespace's parametersRef ConfigMap
}

var sizings = []sizing{
	{name: "defaults", waypoint: "provision: always", replicas: 1, cpu: "100m"},
	{name: "resources", waypoint: "provision: always\nresources: {requests: {cpu: 250m, memory: 256Mi}}", replicas: 1, cpu: "250m"},
	{name: "two-replicas", waypoint: "provision: always\nreplicas: 2", replicas: 2, cpu: "100m", pdb: true, spread: true},
	{name: "autoscaling", waypoint: "provision: always\nautoscaling: {minReplicas: 2, maxReplicas: 4}", replicas: 1, cpu: "100m",
		hpa: &[2]int32{2, 4}, pdb: true, spread: true},
	{name: "per-profile", waypoint: "provision: always\nsizingOverrides:\n- namespaceSelector: {matchLabels: {example.com/tier: large}}\n  maximum: {replicas: 3}",
		labels:   map[string]string{"example.com/tier": "large"},
		plugins:  []profilev1.Plugin{{TypeMeta: metav1.TypeMeta{Kind: "Waypoint"}, Spec: &runtime.RawExtension{Raw: []byte(`{"replicas":3}`)}}},
		replicas: 3, cpu: "100m", pdb: true, spread: true, params: true},
}

// The cluster objects of `render -cluster` for each sizing the configuration offers (and a
// Profile's own, through sizingOverrides), honoured by the real istiod: the waypoint Deployment it
// applies has the replicas, resources, seccomp profile and spread, the autoscaler and budget are
// there when asked for, Pod Security restricted admits the pods made from its template, and the
// waypoint is Programmed and routed.
func TestRenderClusterSizingsAreHonouredByIstiodUnderRestricted(t *testing.T) {
	w := start(t, pluginConfig(sizings[0].waypoint))
	for i, s := range sizings {
		t.Run(s.name, func(t *testing.T) {
			w.t = t
			if i > 0 {
				w.reconfigure(pluginConfig(s.waypoint))
			}
			ns := "sizing-" + s.name
			if s.labels != nil {
				w.handedOver(ns, s.labels)
			}
			w.profile(ns, s.plugins...)
			d := w.deployedByIstiod(ns, func(d *appsv1.Deployment) (bool, string) {
				return ptr.Deref(d.Spec.Replicas, 1) == s.replicas, fmt.Sprintf("replicas %v, want %d", d.Spec.Replicas, s.replicas)
			})
			w.checkPodTemplate(d, s)
			w.checkBudgetAndAutoscaler(ns, s)
			w.checkAdmitted(ns, s)
			gw := w.programmedGateway(ns)
			if got := gw.Spec.Infrastructure != nil && gw.Spec.Infrastructure.ParametersRef != nil; got != s.params {
				t.Errorf("Gateway parametersRef set: %v, want %v", got, s.params)
			}
			w.routed(ns)
		})
	}
}

func (w *world) checkPodTemplate(d *appsv1.Deployment, s sizing) {
	w.t.Helper()
	spec := d.Spec.Template.Spec
	if sc := spec.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		w.t.Errorf("pod seccompProfile %v, want RuntimeDefault", spec.SecurityContext)
	}
	for _, c := range spec.Containers {
		if c.Name == "istio-proxy" {
			if got := c.Resources.Requests.Cpu().String(); got != s.cpu {
				w.t.Errorf("istio-proxy CPU request %s, want %s", got, s.cpu)
			}
			w.t.Logf("istio-proxy resources %v", c.Resources)
		}
	}
	if got := len(spec.TopologySpreadConstraints) > 0; got != s.spread {
		w.t.Errorf("topology spread %v, want spread: %v", spec.TopologySpreadConstraints, s.spread)
	}
}

func (w *world) checkBudgetAndAutoscaler(ns string, s sizing) {
	w.t.Helper()
	if s.pdb {
		pdb := &policyv1.PodDisruptionBudget{}
		w.eventually("PodDisruptionBudget of "+ns, func() (bool, string) {
			if err := w.get(pdb, ns, waypoint); err != nil {
				return false, err.Error()
			}
			return pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.IntValue() == 1 && pdb.Spec.MinAvailable == nil,
				fmt.Sprintf("minAvailable %v maxUnavailable %v", pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable)
		})
		w.t.Logf("PodDisruptionBudget %s/%s: managers %v", ns, waypoint, managersOf(pdb))
	} else if err := w.get(&policyv1.PodDisruptionBudget{}, ns, waypoint); !gone(err) {
		w.t.Errorf("a PodDisruptionBudget nobody asked for (%v)", err)
	}
	if s.hpa != nil {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		w.eventually("HorizontalPodAutoscaler of "+ns, func() (bool, string) {
			if err := w.get(hpa, ns, waypoint); err != nil {
				return false, err.Error()
			}
			return ptr.Deref(hpa.Spec.MinReplicas, 0) == s.hpa[0] && hpa.Spec.MaxReplicas == s.hpa[1],
				fmt.Sprintf("min %v max %d", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
		})
	} else if err := w.get(&autoscalingv2.HorizontalPodAutoscaler{}, ns, waypoint); !gone(err) {
		w.t.Errorf("a HorizontalPodAutoscaler nobody asked for (%v)", err)
	}
}

// checkAdmitted: the namespace enforces restricted and the API server admitted every pod the
// stand-in made from the waypoint's template.
func (w *world) checkAdmitted(ns string, s sizing) {
	w.t.Helper()
	w.eventually(fmt.Sprintf("%d waypoint pod(s) admitted under restricted in %s", s.replicas, ns), func() (bool, string) {
		n := &corev1.Namespace{}
		if err := w.get(n, "", ns); err != nil {
			return false, err.Error()
		}
		if n.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
			return false, fmt.Sprintf("namespace labels %v", n.Labels)
		}
		pods := &corev1.PodList{}
		if err := w.c.List(w.t.Context(), pods, client.InNamespace(ns), client.MatchingLabels{"gateway.networking.k8s.io/gateway-name": waypoint}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == int(s.replicas), fmt.Sprintf("%d pods; refused: %s", len(pods.Items), w.standIn.Refused(ns))
	})
}
