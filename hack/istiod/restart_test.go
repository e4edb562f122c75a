package istiod

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// istiod restarts while namespaces are routed: they stay routed, their Gateways stay Programmed
// (written again by the new istiod), and ztunnel, reconnected, receives their policies again. Then
// istiod is stopped, a Profile is created meanwhile, and istiod started again: the new namespace is
// never routed before istiod reports its waypoint Programmed. Whether istiod deploys it at all is
// istiod's: 1.30.3 can drop a Gateway it sees before its push context is ready and retry it only at
// the Gateway's next event (issue #30's facts): on Dec 5 it deployed it in one run of three.
func TestIstiodRestartKeepsRoutedNamespacesAndDeploysAProfileCreatedMeanwhile(t *testing.T) {
	w := start(t, pluginConfig("provision: always"))
	routed := []string{"restart-rita", "restart-raj"}
	for _, ns := range routed {
		w.profile(ns)
	}
	for _, ns := range routed {
		w.programmedGateway(ns)
		w.routed(ns)
		w.ztunnelPolicy(ns, "before the restart")
	}
	streams := w.ztunnel.Streams()

	w.istiod.Restart()
	for _, ns := range routed {
		w.routed(ns)
		w.programmedGateway(ns)
	}
	w.eventually("ztunnel reconnected", func() (bool, string) { return w.ztunnel.Streams() > streams, "same stream" })
	for _, ns := range routed {
		w.ztunnelPolicy(ns, "after the restart")
	}

	w.istiod.Stop()
	const late = "restart-late"
	w.profile(late)
	w.istiod.Start()
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		n, gw := &corev1.Namespace{}, &gatewayv1.Gateway{}
		if w.get(n, "", late) != nil || n.Labels[useWaypoint] != waypoint {
			continue
		}
		if err := w.get(gw, late, waypoint); err != nil || !programmed(gw) {
			t.Fatalf("%s routed while its waypoint is not Programmed by istiod (%v, %v)", late, err, gw.Status.Conditions)
		}
		w.istiodWroteStatus(gw)
		w.deployedByIstiod(late, nil)
		t.Logf("%s: deployed and Programmed by the restarted istiod, then routed", late)
		return
	}
	t.Logf("%s: istiod did not deploy the waypoint of a Gateway made while it was down within %s; the namespace stayed unrouted", late, wait)
}
