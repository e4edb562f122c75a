package istiod

import (
	"testing"
)

// istiod restarts while namespaces are routed: they stay routed, their Gateways stay Programmed
// (written again by the new istiod), and ztunnel, reconnected, receives their policies again. Then
// istiod is stopped, a Profile is created meanwhile, and istiod started again: the new namespace's
// waypoint must be deployed and Programmed by it.
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
	w.deployedByIstiod(late, nil)
	w.programmedGateway(late)
	w.routed(late)
}
