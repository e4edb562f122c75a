package runner_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	profileplugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// endpointSlice is a slice as the EndpointSlice controller writes it for a Service of n pods: the
// Service's labels, the trigger-time annotation, managedFields, and per endpoint an address, a
// pod reference, a node, a zone and the three conditions.
func endpointSlice(i, n int, terminating bool) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%d-abcde", i), Namespace: fmt.Sprintf("kubeflow-user-%d", i%1000),
			UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)), ResourceVersion: fmt.Sprint(1000 + i),
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc-%d", i), discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
				"app": "notebook", "notebook-name": fmt.Sprintf("nb-%d", i)},
			Annotations: map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-01T09:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: fmt.Sprintf("svc-%d", i),
				UID: types.UID(fmt.Sprintf("11111111-0000-4000-8000-%012d", i)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "discovery.k8s.io/v1", FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:addressType":{},"f:endpoints":{},"f:metadata":{"f:annotations":{".":{},"f:endpoints.kubernetes.io/last-change-trigger-time":{}},"f:labels":{".":{},"f:app":{}}},"f:ports":{}}`)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8888), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for k := 0; k < n; k++ {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", i%250, k%250, k/250)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(terminating)},
			NodeName:   ptr.To(fmt.Sprintf("node-%d", k%50)), Zone: ptr.To("zone-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: es.Namespace, Name: fmt.Sprintf("nb-%d-%d", i, k),
				UID: types.UID(fmt.Sprintf("22222222-0000-4000-8000-%012d", k))},
		})
	}
	return es
}

func trimSlice(t testing.TB, es *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out, err := runner.TrimEndpointSlice(es)
	require.NoError(t, err)
	return out.(*discoveryv1.EndpointSlice)
}

func TestTrimEndpointSliceKeepsWhatTheDecisionReads(t *testing.T) {
	t.Parallel()
	full := endpointSlice(7, 3, false)
	got := trimSlice(t, full.DeepCopy())
	assert.Equal(t, full.Name, got.Name)
	assert.Equal(t, full.Namespace, got.Namespace)
	assert.Equal(t, full.UID, got.UID)
	assert.Equal(t, full.ResourceVersion, got.ResourceVersion)
	assert.Equal(t, map[string]string{discoveryv1.LabelServiceName: "svc-7", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}, got.Labels,
		"the EndpointSlice controller's own labels stay, the Service's go")
	assert.True(t, plugin.Serving(got))
	assert.Equal(t, []discoveryv1.Endpoint{{TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: full.Namespace}}}, got.Endpoints,
		"one endpoint, a pod of the namespace, says it serves")
	assert.Empty(t, got.Annotations)
	assert.Empty(t, got.ManagedFields)
	assert.Empty(t, got.Ports)
	assert.Empty(t, got.OwnerReferences)

	again := trimSlice(t, got.DeepCopy())
	assert.Equal(t, got, again, "applied again to its result it changes nothing")

	gone := trimSlice(t, endpointSlice(8, 3, true))
	assert.False(t, plugin.Serving(gone), "only terminating endpoints: it serves nothing")
	assert.Empty(t, gone.Endpoints)

	mirrored := endpointSlice(9, 3, false)
	mirrored.Labels[discoveryv1.LabelManagedBy] = "endpointslicemirroring-controller.k8s.io"
	assert.Empty(t, trimSlice(t, mirrored).Endpoints, "a mirrored slice serves nothing the namespace runs")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	other, err := runner.TrimEndpointSlice(cm)
	require.NoError(t, err)
	assert.Same(t, cm, other, "anything else passes unchanged")
}

// heapOf is the heap that n objects made by mk keep alive, per object.
func heapOf(n int, mk func(i int) any) float64 {
	keep := make([]any, n)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = mk(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// The cache keeps of 10,000 EndpointSlices what TrimEndpointSlice keeps: measured on the heap the
// objects hold, a slice of ten pods costs what a slice of one does, and a fraction of its full form.
// The per-slice figures, printed here, are those of BENCHMARKS.md.
// Not in parallel: it measures the heap, which other tests' allocations would grow.
func TestTrimmedEndpointSlicesCostTheCacheLittle(t *testing.T) {
	const n = 10_000
	full1 := heapOf(n, func(i int) any { return endpointSlice(i, 1, false) })
	full10 := heapOf(n, func(i int) any { return endpointSlice(i, 10, false) })
	trim1 := heapOf(n, func(i int) any { return trimSlice(t, endpointSlice(i, 1, false)) })
	trim10 := heapOf(n, func(i int) any { return trimSlice(t, endpointSlice(i, 10, false)) })
	t.Logf("N=%d EndpointSlices, bytes per slice on the heap: full 1 endpoint %.0f, full 10 endpoints %.0f; trimmed 1 endpoint %.0f, trimmed 10 endpoints %.0f",
		n, full1, full10, trim1, trim10)
	t.Logf("N=%d: full %.1f MiB (1 endpoint) / %.1f MiB (10); trimmed %.1f MiB / %.1f MiB", n,
		full1*n/(1<<20), full10*n/(1<<20), trim1*n/(1<<20), trim10*n/(1<<20))
	assert.Less(t, trim10, 1.2*trim1, "trimmed, the number of endpoints costs nothing")
	// Alone it measures 1015 of 2042 bytes; in the whole package other tests' goroutines move the
	// heap by a few bytes a slice, so the bound leaves room above one half.
	assert.Less(t, trim1, 0.6*full1, "trimmed, a one-pod slice costs little more than half its full form")
	assert.Less(t, trim10, full10/5, "trimmed, a ten-pod slice costs less than a fifth of its full form")
}

// tenantLabels are about size bytes of labels a member puts on a Service, which the EndpointSlice
// controller copies onto its slices: valid keys (a 200-byte prefix) and 63-byte values, each
// string allocated apart, as decoding a watch event allocates them.
func tenantLabels(size int) map[string]string {
	prefix := strings.Repeat("p", 190) + ".example.com/"
	value := strings.Repeat("v", 63)
	out := map[string]string{}
	for n, i := 0, 0; n < size; i++ {
		k := fmt.Sprintf("%spad-%05d", prefix, i)
		out[strings.Clone(k)] = strings.Clone(value)
		n += len(k) + len(value)
	}
	return out
}

// withTenantLabels is endpointSlice(i, 1, false) with size bytes of the Service's labels added.
func withTenantLabels(i, size int) *discoveryv1.EndpointSlice {
	es := endpointSlice(i, 1, false)
	for k, v := range tenantLabels(size) {
		es.Labels[k] = v
	}
	return es
}

// A member's Service labels, copied onto its EndpointSlices, do not reach the cache: of the
// labels only the two the EndpointSlice controller writes itself stay.
func TestTrimEndpointSliceKeepsNoTenantLabel(t *testing.T) {
	t.Parallel()
	got := trimSlice(t, withTenantLabels(1, 64<<10))
	require.Equal(t, 2, len(got.Labels), "labels kept")
	assert.Equal(t, map[string]string{discoveryv1.LabelServiceName: "svc-1", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
		got.Labels)
}

// Given the plugins, the cache keeps the labels they read as well: the keys that
// mesh.waypoint.ignoredServices selects on, whatever their operator, and still none other.
func TestCacheByObjectKeepsTheLabelsThePluginsRead(t *testing.T) {
	t.Parallel()
	cfg := fixture.Config(t, "mesh: {waypoint: {provision: onDemand, ignoredServices: {matchLabels: {always-on: \"true\"}, "+
		"matchExpressions: [{key: tier, operator: NotIn, values: [user]}]}}}\n")
	ps, err := profileplugins.New(cfg)
	require.NoError(t, err)
	var transform func(any) (any, error)
	for obj, by := range runner.CacheByObject(ps...) {
		if _, ok := obj.(*discoveryv1.EndpointSlice); ok {
			transform = by.Transform
		}
	}
	require.NotNil(t, transform)
	es := withTenantLabels(3, 16<<10)
	es.Labels["always-on"], es.Labels["tier"] = "true", "platform"
	out, err := transform(es)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{discoveryv1.LabelServiceName: "svc-3", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
		"always-on": "true", "tier": "platform"}, out.(*discoveryv1.EndpointSlice).Labels)
}
