package platform_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

// Finding 8 of internal/safety/FINDINGS-2.md: without class defaults (and without the per-namespace patch) the check
// reports, at a configured baseline, the lower-severity kind: Profiles that choose restricted
// wait forever. Class defaults that set the seccomp profile, or the patch, clear it.
func TestCheckPlatformWaypointUnderAProfileChosenRestricted(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	c := healthyPlatform(t, cfg, ingressPod(t, cfg, "10.42.0.9"))
	report, err := platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	assert.Empty(t, report.Findings, "the class defaults are there")

	require.NoError(t, c.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace("istio-system")))
	for _, level := range []psaapi.Level{psaapi.LevelBaseline, psaapi.LevelPrivileged} {
		cfg.PodSecurity.Enforce.Level = level
		report, err = platform.Check(context.Background(), c, cfg)
		require.NoError(t, err)
		assert.Equal(t, []platform.Finding{{Kind: platform.FindingWaypointCannotStartIfRestricted, What: platform.WhatWaypoint, Namespace: "istio-system",
			Problem: "enforce is " + string(level) + ", but any Profile may choose restricted (and a stricter enforce label set by another writer is kept), " +
				"and mesh.waypoint.seccompPatch is off, and no ConfigMap in namespace istio-system is labelled gateway.istio.io/defaults-for-class=istio-waypoint: " +
				"in each such namespace Pod Security rejects the waypoint's pods, so it is never Programmed and the namespace waits for it forever",
			Fix: "apply the class-defaults ConfigMap that `render -cluster` emits into namespace istio-system, or set mesh.waypoint.seccompPatch: true"}},
			report.Findings, level)
	}
	cfg.PodSecurity.Enforce.Level = "restricted"
	report, err = platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	require.Len(t, report.Findings, 1)
	assert.Equal(t, platform.FindingWaypointCannotStart, report.Findings[0].Kind, "restricted configured: the full-severity kind")

	cfg.Mesh.Waypoint.SeccompPatch = ptr.To(true)
	report, err = platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	assert.Empty(t, report.Findings, "the per-namespace patch makes every waypoint admissible")
}

// Without the class defaults, the default configuration (enforce baseline) still gets a finding:
// a Profile may always choose restricted, and a stricter level another writer set is kept.
func TestCheckReportsMissingClassDefaultsUnderTheDefaultLevel(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	c := healthyPlatform(t, cfg, ingressPod(t, cfg, "10.42.0.9"))
	defaults, err := waypoint.ClassDefaults(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Delete(context.Background(), defaults))
	report, err := platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	require.Len(t, report.Findings, 1, "no waypoint class defaults in ambient mode: every Profile that chooses restricted waits forever")
	assert.Equal(t, platform.FindingWaypointCannotStartIfRestricted, report.Findings[0].Kind)
}
