package istiod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// always mode with the real istiod: the controller writes the Gateway, istiod deploys it and,
// once the stand-in made its pod ready, reports it Programmed; the controller routes the namespace
// only after that. Both watches record every version of the namespace and the Gateway, so the
// order is checked on what happened, not only on where it ended.
func TestAlwaysModeRoutesOnlyOnceIstiodProgrammedTheGateway(t *testing.T) {
	w := start(t, pluginConfig("provision: always"))
	namespaces := record(t, w.env, &corev1.NamespaceList{})
	gateways := record(t, w.env, &gatewayv1.GatewayList{})
	const ns = "always-alice"
	w.profile(ns)

	w.deployedByIstiod(ns, nil)
	gw := w.programmedGateway(ns)
	w.routed(ns)
	t.Logf("Gateway %s/%s addresses %v", ns, waypoint, gw.Status.Addresses)

	firstRouted := firstRevision(namespaces.objects(), func(o metav1.Object) bool {
		return o.GetName() == ns && o.GetLabels()[useWaypoint] == waypoint
	})
	firstProgrammed := firstRevision(gateways.objects(), func(o metav1.Object) bool {
		g, ok := o.(*gatewayv1.Gateway)
		return ok && g.Namespace == ns && programmed(g)
	})
	sawUnprogrammed := firstRevision(gateways.objects(), func(o metav1.Object) bool {
		g, ok := o.(*gatewayv1.Gateway)
		if !ok || g.Namespace != ns {
			return false
		}
		c := meta.FindStatusCondition(g.Status.Conditions, string(gatewayv1.GatewayConditionProgrammed))
		return c != nil && c.Status == metav1.ConditionFalse
	})
	t.Logf("revisions: Programmed=False first seen %d, Programmed=True at the Gateway's generation first %d, namespace routed first %d",
		sawUnprogrammed, firstProgrammed, firstRouted)
	if firstProgrammed == 0 || firstRouted == 0 {
		t.Fatalf("the watches missed it: Programmed at %d, routed at %d", firstProgrammed, firstRouted)
	}
	if firstRouted < firstProgrammed {
		t.Errorf("namespace %s routed at revision %d, before istiod programmed its waypoint at %d", ns, firstRouted, firstProgrammed)
	}
}

// firstRevision is the resourceVersion of the first recorded object that matches, or 0.
func firstRevision[T metav1.Object](objs []T, match func(metav1.Object) bool) uint64 {
	for _, o := range objs {
		if match(o) {
			return revisionOf(o)
		}
	}
	return 0
}
