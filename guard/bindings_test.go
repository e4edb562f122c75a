package guard_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A Binding's labels are copied onto its pod: only the topology labels the scheduler's Bindings
// get (from the PodTopologyLabels admission plugin) pass; a label the waypoint's Service selects,
// or a ReplicaSet's pod-template-hash, does not.
func TestBindingsCarryOnlyTopologyLabels(t *testing.T) {
	t.Parallel()
	s := guarded(t)
	ctx := context.Background()
	ns := s.namespace(t, "bindings")
	pod := plainPod(ns, "unscheduled")
	if err := s.env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	bind := func(labels map[string]string) error {
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns, Labels: labels},
			Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
		return s.as(t, widened).SubResource("binding").Create(ctx, pod, b, client.DryRunAll)
	}
	notTheGuards(t, bind(map[string]string{"topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1"}), "topology labels")
	notTheGuards(t, bind(nil), "no labels")
	refusedBy(t, bind(map[string]string{"pod-template-hash": "5d8f9"}), "bindings/labels", "a ReplicaSet's pod-template-hash")
	refusedBy(t, bind(map[string]string{"gateway.networking.k8s.io/gateway-name": wp}), "bindings/labels", "the waypoint Service's selector")
}
