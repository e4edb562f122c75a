package main

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// countNamespaceWrites makes the runner record the field manager of each namespace write it sends.
func (h *harness) countNamespaceWrites() *[]string {
	c := &namespaceWrites{Client: h.r.Runner.Client}
	h.r.Runner.Client = c
	return &c.managers
}

type namespaceWrites struct {
	client.Client
	managers []string
}

func (c *namespaceWrites) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if _, ok := obj.(*corev1ac.NamespaceApplyConfiguration); ok {
		c.managers = append(c.managers, (&client.ApplyOptions{}).ApplyOptions(opts).FieldManager)
	}
	return c.Client.Apply(ctx, obj, opts...)
}

// The first reconcile writes every plugin's labels in one namespace write, as the profiles
// controller updates a namespace once, and a steady state writes nothing.
func TestFirstReconcileWritesTheNamespaceOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	const ns = "labels-once"
	createProfile(t, h.env.Client, ns, "once@example.com")
	h.reconcile(ns) // creates the namespace, as the profiles controller would, and writes once
	n := h.namespace(ns)
	assert.Equal(t, map[string][]string{
		"pss":      {"pod-security.kubernetes.io/audit", "pod-security.kubernetes.io/audit-version", "pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/enforce-version", "pod-security.kubernetes.io/warn", "pod-security.kubernetes.io/warn-version"},
		"waypoint": {"istio-injection", "istio.io/dataplane-mode"},
	}, decodeOwners(t, n))
	keys := fixture.LabelKeysByManager(t, n)
	assert.NotContains(t, keys, plugin.FieldManager("pss"))
	assert.NotContains(t, keys, plugin.FieldManager("waypoint"))
	assert.Len(t, keys[plugin.LabelFieldManager], 8)

	h.programWaypoint(ns)
	written := h.countNamespaceWrites()
	h.reconcile(ns)
	assert.Equal(t, []string{plugin.LabelFieldManager}, *written, "routing to the waypoint is one namespace write")
	assert.Equal(t, "waypoint", h.labels(ns)["istio.io/use-waypoint"])
	writes := h.env.Requests.Writes()
	h.reconcile(ns)
	assert.Equal(t, writes, h.env.Requests.Writes(), "steady state")
}

func decodeOwners(t *testing.T, n *corev1.Namespace) map[string][]string {
	t.Helper()
	var out map[string][]string
	require.NoError(t, json.Unmarshal([]byte(n.Annotations[plugin.LabelOwnersAnnotation]), &out))
	return out
}

// rewind puts a namespace the current release reconciled back into the previous release's state:
// each plugin's labels under its own field manager, as its Runner.applyLabels wrote them, plus the
// retired labels each old manager owned that no plugin wants now; no shared manager, no
// annotation; and another writer's label. It returns the labels the plugins want.
func (h *harness) rewind(ns string, retired map[string]map[string]string) (wanted map[string]string, owners map[string][]string) {
	h.t.Helper()
	c, ctx := h.env.Client, context.Background()
	current := h.namespace(ns)
	owners = decodeOwners(h.t, current)
	for name, keys := range owners {
		labels := maps.Clone(retired[name])
		if labels == nil {
			labels = map[string]string{}
		}
		for _, k := range keys {
			labels[k] = current.Labels[k]
		}
		require.NoError(h.t, c.Apply(ctx, corev1ac.Namespace(ns).WithLabels(labels),
			client.FieldOwner(plugin.FieldManager(name)), client.ForceOwnership))
	}
	require.NoError(h.t, c.Apply(ctx, corev1ac.Namespace(ns), client.FieldOwner(plugin.LabelFieldManager), client.ForceOwnership))
	require.NoError(h.t, c.Apply(ctx, corev1ac.Namespace(ns).WithLabels(map[string]string{"team": "research"}), client.FieldOwner("profiles-controller")))
	old := h.namespace(ns)
	require.NotContains(h.t, old.Annotations, plugin.LabelOwnersAnnotation)
	require.NotContains(h.t, fixture.LabelKeysByManager(h.t, old), plugin.LabelFieldManager)
	for _, labels := range retired {
		for k, v := range labels {
			require.Equal(h.t, v, old.Labels[k])
		}
	}
	wanted = maps.Clone(current.Labels)
	wanted["team"] = "research"
	return wanted, owners
}

// A namespace the previous release labelled has each plugin's labels under the plugin's own field
// manager (profile-plugins/pss, profile-plugins/waypoint) and no owners annotation. On the real
// API server, the first reconcile after the upgrade takes them over, once: the shared apply
// co-owns every label that stays, then an apply naming no label under each old manager lets go of
// the rest. Labels stay where the shared manager now co-owns them; a label the old manager owned
// alone that no plugin wants any more is removed; another writer's label is untouched.
func TestUpgradeTakesOverThePerPluginLabelManagers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, config.ModeAmbient)
	for _, tc := range []struct {
		ns      string
		retired map[string]map[string]string
		writes  []string
	}{{
		// The usual upgrade: three writes.
		ns:      "labels-upgrade",
		retired: map[string]map[string]string{"pss": {"pss.example/retired": "true"}},
		writes:  []string{plugin.LabelFieldManager, plugin.FieldManager("waypoint"), plugin.FieldManager("pss")},
	}, {
		// An enrolment label to withdraw as well (use-waypoint of a waypoint that is not
		// Programmed): the withdrawal takes everything over before the objects change, and the
		// label phase then drops the retired pss label the withdrawal had to keep.
		ns: "labels-withdraw",
		retired: map[string]map[string]string{
			"waypoint": {"istio.io/use-waypoint": "waypoint"},
			"pss":      {"pss.example/retired": "true"},
		},
		writes: []string{plugin.LabelFieldManager, plugin.FieldManager("waypoint"), plugin.FieldManager("pss"), plugin.LabelFieldManager},
	}} {
		t.Run(tc.ns, func(t *testing.T) {
			h.t = t
			createProfile(t, h.env.Client, tc.ns, tc.ns+"@example.com")
			h.reconcile(tc.ns)
			wanted, owners := h.rewind(tc.ns, tc.retired)

			written := h.countNamespaceWrites()
			h.reconcile(tc.ns)
			assert.Equal(t, tc.writes, *written)
			n := h.namespace(tc.ns)
			assert.Equal(t, wanted, n.Labels, "every wanted label stays; the retired ones are gone")
			keys := fixture.LabelKeysByManager(t, n)
			assert.NotContains(t, keys, plugin.FieldManager("pss"), "released")
			assert.NotContains(t, keys, plugin.FieldManager("waypoint"), "released")
			assert.Equal(t, []string{"team"}, keys["profiles-controller"])
			assert.ElementsMatch(t, slices.Concat(owners["pss"], owners["waypoint"]), keys[plugin.LabelFieldManager])
			assert.Equal(t, owners, decodeOwners(t, n))

			*written = nil
			writes := h.env.Requests.Writes()
			h.reconcile(tc.ns)
			assert.Equal(t, writes, h.env.Requests.Writes(), "the upgrade writes once; then steady state")
			assert.Empty(t, *written)
		})
	}
}
