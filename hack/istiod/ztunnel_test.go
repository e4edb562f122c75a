package istiod

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	"istio.io/istio/pkg/workloadapi/security"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

// What ztunnel receives from the real istiod for a namespace, in each state it passes through:
// active (routed), its ztunnel policy deleted but held by the plugins' finalizer, and revoked (the
// Profile deleted while a pod runs, then the pod gone). The L4 policy arrives at namespace scope,
// admits the waypoint by its identity and has no wildcard; the owner policy, which targets the
// waypoint, never reaches ztunnel.
func TestZtunnelReceivesTheNamespacePolicyInEveryState(t *testing.T) {
	w := start(t, pluginConfig("provision: always"))
	const ns = "ztunnel-zoe"
	w.handedOver(ns, nil)
	pod := w.workload(ns, "notebook")
	w.profile(ns)
	w.programmedGateway(ns)
	w.routed(ns)

	w.ztunnelPolicy(ns, "active")
	w.requireNoOwnerPolicy(ns)

	// The finalizer protects the policy in a namespace the Profile controls (one it created).
	const controlled = "ztunnel-held"
	w.profile(controlled)
	w.programmedGateway(controlled)
	w.routed(controlled)
	before := w.ztunnelPolicy(controlled, "active")
	ap := &istiosecurityv1.AuthorizationPolicy{}
	must(t, w.get(ap, controlled, ztunnelPolicy), "reading the ztunnel policy")
	must(t, w.c.Delete(t.Context(), ap), "deleting the ztunnel policy")
	w.eventually("the deleted ztunnel policy held by its finalizer", func() (bool, string) {
		if err := w.get(ap, controlled, ztunnelPolicy); err != nil {
			return false, err.Error()
		}
		return ap.DeletionTimestamp != nil, fmt.Sprintf("no deletionTimestamp; finalizers %v", ap.Finalizers)
	})
	time.Sleep(3 * time.Second) // istiod has seen the deletionTimestamp
	held := w.ztunnelPolicy(controlled, "held after delete")
	if !proto.Equal(before, held) {
		t.Errorf("the held policy changed at ztunnel:\nactive %s\nheld   %s", protojson.Format(before), protojson.Format(held))
	}

	must(t, w.c.Delete(t.Context(), &profilev1.Profile{ObjectMeta: objectMeta("", ns)}), "deleting the Profile")
	w.unrouted(ns)
	w.ztunnelPolicy(ns, "revoked while a pod runs")
	must(t, w.c.Delete(t.Context(), pod, client.GracePeriodSeconds(0)), "deleting the pod")
	w.eventually("ztunnel's policy withdrawn once revoke finished", func() (bool, string) {
		p := w.ztunnel.Policy(ns + "/" + ztunnelPolicy)
		return p == nil, fmt.Sprintf("still held: %v", p)
	})
}

// ztunnelPolicy waits until the xDS client holds ns's ztunnel policy, checks its shape and returns it.
func (w *world) ztunnelPolicy(ns, state string) *security.Authorization {
	w.t.Helper()
	key := ns + "/" + ztunnelPolicy
	var p *security.Authorization
	w.eventually("ztunnel holds "+key+" ("+state+")", func() (bool, string) {
		p = w.ztunnel.Policy(key)
		return p != nil, fmt.Sprintf("holds %d policies", len(w.ztunnel.Policies()))
	})
	w.t.Logf("%s at ztunnel (%s): %s", key, state, protojson.Format(p))
	if err := checkZtunnelPolicy(p, ns); err != nil {
		w.t.Errorf("%s (%s): %v", key, state, err)
	}
	return p
}

// checkZtunnelPolicy: an ALLOW at namespace scope that admits the waypoint's ServiceAccount, whose
// every rule names someone, and no value of which is a wildcard.
func checkZtunnelPolicy(p *security.Authorization, ns string) error {
	if p.Scope != security.Scope_NAMESPACE || p.Namespace != ns {
		return fmt.Errorf("scope %s namespace %q, want NAMESPACE %q", p.Scope, p.Namespace, ns)
	}
	if p.Action != security.Action_ALLOW {
		return fmt.Errorf("action %s, want ALLOW", p.Action)
	}
	waypointAdmitted := false
	for _, g := range p.Groups {
		for _, r := range g.Rules {
			if len(r.Matches) == 0 {
				return fmt.Errorf("a rule without matches admits everyone")
			}
			for _, m := range r.Matches {
				if err := checkMatch(m); err != nil {
					return err
				}
				for _, sa := range m.ServiceAccounts {
					waypointAdmitted = waypointAdmitted || (sa.Namespace == ns && sa.ServiceAccount == waypoint)
				}
			}
		}
	}
	if !waypointAdmitted {
		return fmt.Errorf("no rule admits the waypoint's identity %s/%s", ns, waypoint)
	}
	return nil
}

func checkMatch(m *security.Match) error {
	if len(m.Namespaces)+len(m.ServiceAccounts)+len(m.Principals)+len(m.SourceIps)+len(m.DestinationPorts) == 0 {
		return fmt.Errorf("a match that names no one: %v", m)
	}
	for _, s := range append(append([]*security.StringMatch{}, m.Namespaces...), m.Principals...) {
		if _, presence := s.MatchType.(*security.StringMatch_Presence); presence {
			return fmt.Errorf("a presence (wildcard) match: %v", s)
		}
		if v := s.String(); strings.Contains(v, "*") {
			return fmt.Errorf("a wildcard in %v", s)
		}
		if _, exact := s.MatchType.(*security.StringMatch_Exact); !exact {
			return fmt.Errorf("a prefix or suffix match: %v", s)
		}
	}
	for _, sa := range m.ServiceAccounts {
		if sa.Namespace == "" || sa.ServiceAccount == "" || strings.Contains(sa.Namespace+sa.ServiceAccount, "*") {
			return fmt.Errorf("a service account match with a wildcard: %v", sa)
		}
	}
	return nil
}

// requireNoOwnerPolicy checks that the owner policy, which targets the waypoint, is not at ztunnel
// although it exists.
func (w *world) requireNoOwnerPolicy(ns string) {
	w.t.Helper()
	must(w.t, w.get(&istiosecurityv1.AuthorizationPolicy{}, ns, ownerPolicy), "reading the owner policy")
	if p := w.ztunnel.Policy(ns + "/" + ownerPolicy); p != nil {
		w.t.Errorf("the owner policy reached ztunnel: %s", protojson.Format(p))
	}
}

func objectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}
