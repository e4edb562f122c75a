package runner_test

import (
	"testing"

	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// The figure of BENCHMARKS.md: how much the cache grows per MiB of labels a member puts on
// Services, which the EndpointSlice controller copies onto their slices. Twenty slices carry 900 KB
// of such labels each (as in the attack review); the growth is the heap the trimmed slices hold
// beyond that of the same slices without those labels, per MiB of labels.
func BenchmarkEndpointSliceCacheGrowthPerMiBOfServiceLabels(b *testing.B) {
	const slices, size = 20, 900 << 10
	trim := func(obj any) any {
		out, err := runner.TrimEndpointSlice(obj)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	var with, without float64
	for b.Loop() {
		without = heapOf(slices, func(i int) any { return trim(endpointSlice(i, 1, false)) })
		with = heapOf(slices, func(i int) any { return trim(withTenantLabels(i, size)) })
	}
	b.ReportMetric(without, "cached-B/slice-without")
	b.ReportMetric(with, "cached-B/slice-with")
	b.ReportMetric((with-without)/(float64(size)/(1<<20)), "growth-B/label-MiB")
}
