package platform_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/ownership"
	"github.com/kubeflow-ambient/profile-plugins/platform"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
)

// managed is a managedFields entry of manager for one label.
func managed(manager string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:istio.io/dataplane-mode":{}}}}`)}
}

func podWithIP(namespace, name, sa, ip string) *corev1.Pod {
	pod := fixture.MeshPod(namespace, name, sa, fixture.AmbientPod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	return pod
}

// Finding 2 of internal/safety/FINDINGS-2.md: an ipBlocks entry that holds a pod IP of the ingress gateway or of an
// onBehalfOfUser caller is reported, naming the entry and a pod; a caller admitted without the
// header (the culler) is not a forwarder, and ipBlocks matter only in ambient mode.
func TestCheckPlatformIPBlocksCoveringForwarders(t *testing.T) {
	t.Parallel()
	cfg := fixture.Config(t, "authorization: {l4Exceptions: [{ipBlocks: [10.42.7.0/24, 10.9.0.0/16], ports: [9091]}, {ipBlocks: ['fd00::/64']}]}\n")
	pods := []client.Object{ingressPod(t, cfg, "10.42.7.15"),
		podWithIP("kubeflow", "ml-pipeline-ui-0", "ml-pipeline-ui", "10.9.1.1"),
		podWithIP("kubeflow", "ml-pipeline-ui-1", "ml-pipeline-ui", "10.8.0.1"),
		podWithIP("kubeflow", "notebook-controller-service-account-0", "notebook-controller-service-account", "10.42.7.16")}
	report, err := platform.Check(context.Background(), healthyPlatform(t, cfg, pods...), cfg)
	require.NoError(t, err)
	const ingress = "cluster.local/ns/istio-system/sa/istio-ingressgateway-service-account"
	assert.Equal(t, []platform.Finding{
		{Kind: platform.FindingIPBlockCoversForwarder, What: platform.WhatIngressGateway, Namespace: "istio-system", Principal: ingress,
			Problem: `authorization.l4Exceptions[0].ipBlocks[0] "10.42.7.0/24" holds the IP of 1 of its 1 pod(s), e.g. istio-ingressgateway-7f9 (10.42.7.15): ` +
				"the ztunnel policy of every user namespace admits them straight to the pods, past the waypoint that checks the user-id header, and ingress-gateway forwards requests for any user",
			Fix: "narrow authorization.l4Exceptions[0].ipBlocks[0] to the addresses of the client it is for, so that it holds no pod of ingress-gateway (a node's pod range holds every pod scheduled on that node)"},
		{Kind: platform.FindingIPBlockCoversForwarder, What: "pipelines-ui", Namespace: "kubeflow", Principal: pipelinesUI,
			Problem: `authorization.l4Exceptions[0].ipBlocks[1] "10.9.0.0/16" holds the IP of 1 of its 2 pod(s), e.g. ml-pipeline-ui-0 (10.9.1.1): ` +
				"the ztunnel policy of every user namespace admits them straight to the pods, past the waypoint that checks the user-id header, and pipelines-ui forwards requests for any user",
			Fix: "narrow authorization.l4Exceptions[0].ipBlocks[1] to the addresses of the client it is for, so that it holds no pod of pipelines-ui (a node's pod range holds every pod scheduled on that node)"},
	}, report.Findings)

	sidecar := *cfg
	sidecar.Mesh.Mode = config.ModeSidecar
	// The same cluster with the guard sidecar mode renders.
	report, err = platform.Check(context.Background(), healthyPlatform(t, &sidecar, pods...), &sidecar)
	require.NoError(t, err)
	assert.Empty(t, report.Findings, "the ztunnel policy, the only user of ipBlocks, is written in ambient mode only")
}

// Finding 3 of internal/safety/FINDINGS-2.md: the namespace of a platform caller, of the ingress gateway or of an L4
// exception is reported when it is a user's by the runner's own rule, or when the plugins have
// labelled it; a namespace a non-Profile controls, or one with only the owner annotation under
// namespaces.ownership: ownerReference, is not a Profile's.
func TestCheckPlatformTrustedNamespaceOfAUser(t *testing.T) {
	t.Parallel()
	profileRef := []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1beta1", Kind: "Profile", Name: "kubeflow", UID: "u-1", Controller: ptr.To(true)}}
	otherRef := []metav1.OwnerReference{{APIVersion: "apps.example.com/v1", Kind: "Platform", Name: "kubeflow", UID: "u-2", Controller: ptr.To(true)}}
	owner := map[string]string{ownership.OwnerAnnotation: "mallory@example.com"}
	for name, tc := range map[string]struct {
		meta      metav1.ObjectMeta
		ownership config.NamespaceOwnership
		why       string // empty: no finding
	}{
		"controlled by a Profile":            {meta: metav1.ObjectMeta{OwnerReferences: profileRef}, why: "Profile kubeflow controls it"},
		"owner annotation":                   {meta: metav1.ObjectMeta{Annotations: owner}, why: `its "owner" annotation is "mallory@example.com", so a Profile of that owner may have it`},
		"owner annotation, ref required":     {meta: metav1.ObjectMeta{Annotations: owner}, ownership: config.OwnershipReference},
		"owner annotation, other controller": {meta: metav1.ObjectMeta{Annotations: owner, OwnerReferences: otherRef}},
		"the plugins' label owners": {meta: metav1.ObjectMeta{Annotations: map[string]string{plugin.LabelOwnersAnnotation: `{"pss":["pod-security.kubernetes.io/enforce"]}`}},
			why: "the plugins have labelled it: it has the annotation " + plugin.LabelOwnersAnnotation},
		"the plugins' field manager": {meta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{managed("kubectl"), managed(plugin.LabelFieldManager)}},
			why: "the plugins have labelled it: field manager profile-plugins"},
		"a plugin's old field manager": {meta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{managed(plugin.FieldManager("pss"))}},
			why: "the plugins have labelled it: field manager profile-plugins/pss"},
		"the platform's": {meta: metav1.ObjectMeta{Labels: map[string]string{"istio.io/dataplane-mode": "ambient"}}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := fixture.Config(t, "authorization: {l4Exceptions: [{namespaces: [monitoring, absent]}, {serviceAccounts: [monitoring/prometheus]}]}\n")
			if tc.ownership != "" {
				cfg.Namespaces.Ownership = tc.ownership
			}
			kubeflow, monitoring := tc.meta, tc.meta
			kubeflow.Name, monitoring.Name = "kubeflow", "monitoring"
			kubeflow.Labels = map[string]string{"istio.io/dataplane-mode": "ambient"}
			kubeflow.ManagedFields, monitoring.ManagedFields = nil, nil
			c := healthyPlatform(t, cfg, &corev1.Namespace{ObjectMeta: kubeflow}, &corev1.Namespace{ObjectMeta: monitoring}, ingressPod(t, cfg, "10.42.0.9"))
			// The fake client keeps managedFields of its own; the API server's are read as they come.
			withFields := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				err := c.Get(ctx, key, obj, opts...)
				if ns, ok := obj.(*corev1.Namespace); ok && err == nil && (key.Name == "kubeflow" || key.Name == "monitoring") {
					ns.ManagedFields = tc.meta.ManagedFields
				}
				return err
			}})
			report, err := platform.Check(context.Background(), withFields, cfg)
			require.NoError(t, err, "a missing exception namespace is no error")
			if tc.why == "" {
				assert.Empty(t, report.Findings)
				return
			}
			caller := func(what, principal, sa, admits, path string) platform.Finding {
				return platform.Finding{Kind: platform.FindingTrustedNamespaceUserControlled, What: what, Namespace: "kubeflow", Principal: principal,
					Problem: "namespace kubeflow is a user's (" + tc.why + "): the runner refuses its Profile, since the namespace is reserved, " +
						"but whoever owns it can run pods as ServiceAccount " + sa + ", which every user namespace admits " + admits,
					Fix: "run " + what + " in a namespace only admins control and set " + path + " to its principal, or take namespace kubeflow back from its user " +
						"(delete its Profile, or remove the Profile's owner reference, the owner annotation and the plugins' labels)"}
			}
			anyUser := "with whatever user-id header it sends, so those pods act as any user"
			assert.Equal(t, []platform.Finding{
				caller("pipelines-ui", pipelinesUI, "ml-pipeline-ui", anyUser, "authorization.platformCallers[0].principal"),
				caller("notebook-controller", culler, "notebook-controller-service-account", "without the user-id header", "authorization.platformCallers[1].principal"),
				caller("katib-controller", katib, "katib-controller", "without the user-id header", "authorization.platformCallers[2].principal"),
				{Kind: platform.FindingTrustedNamespaceUserControlled, What: platform.WhatL4Exception, Namespace: "monitoring",
					Problem: "namespace monitoring, named by authorization.l4Exceptions[0].namespaces[0], is a user's (" + tc.why + "): the runner refuses its Profile, " +
						"since the namespace is reserved, but whoever owns it can run pods there that the ztunnel policy of every user namespace admits straight to the pods, past the waypoint",
					Fix: "name a namespace only admins control in authorization.l4Exceptions[0].namespaces[0], or take namespace monitoring back from its user " +
						"(delete its Profile, or remove the Profile's owner reference, the owner annotation and the plugins' labels)"},
			}, report.Findings)
		})
	}
}

// The ingress gateway's namespace is checked like a caller's; a read error of an exception's
// namespace is returned, naming the field.
func TestCheckPlatformIngressNamespaceOfAUserAndReadErrors(t *testing.T) {
	t.Parallel()
	cfg := fixture.Config(t, "authorization: {l4Exceptions: [{principals: [cluster.local/ns/monitoring/sa/prometheus]}]}\n")
	gateway := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system", Annotations: map[string]string{ownership.OwnerAnnotation: "mallory@example.com"}}}
	c := healthyPlatform(t, cfg, gateway, ingressPod(t, cfg, "10.42.0.9"))
	report, err := platform.Check(context.Background(), c, cfg)
	require.NoError(t, err)
	require.Len(t, report.Findings, 1)
	assert.Equal(t, platform.FindingTrustedNamespaceUserControlled, report.Findings[0].Kind)
	assert.Equal(t, platform.WhatIngressGateway, report.Findings[0].What)
	assert.Contains(t, report.Findings[0].Problem, "which every user namespace admits with whatever user-id header it sends")
	assert.Contains(t, report.Findings[0].Fix, "set authorization.principals.ingressGateway to its principal")

	boom := errors.New("boom")
	failing := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if key.Name == "monitoring" {
			return boom
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	_, err = platform.Check(context.Background(), failing, cfg)
	assert.ErrorIs(t, err, boom)
	assert.EqualError(t, err, "L4 exception (authorization.l4Exceptions[0].principals[0]): reading Namespace monitoring: boom")
}

// The exception of the README's example, ipBlocks 10.42.7.0/24, is a node's pod range (k3s,
// flannel): when the ingress gateway runs on that node, the exception admits it at L4, where
// nobody checks the user-id header it forwards. Validation cannot know pod addresses; the check
// reads them (finding 2 of internal/safety/FINDINGS-2.md).
func TestCheckReportsAnIPBlockHoldingTheIngressGateway(t *testing.T) {
	t.Parallel()
	cfg := fixture.Config(t, "authorization: {l4Exceptions: [{ipBlocks: [10.42.7.0/24], ports: [9091]}]}\n")
	report, err := platform.Check(context.Background(), healthyPlatform(t, cfg, ingressPod(t, cfg, "10.42.7.15")), cfg)
	require.NoError(t, err)
	require.Len(t, report.Findings, 1, "the ingress gateway's pod 10.42.7.15 is in authorization.l4Exceptions[0].ipBlocks[0] 10.42.7.0/24")
	assert.Equal(t, platform.FindingIPBlockCoversForwarder, report.Findings[0].Kind)
	assert.Equal(t, platform.WhatIngressGateway, report.Findings[0].What)
}

// A sidecar caller whose principal is in a Profile's namespace: reserving the namespace only makes
// the runner refuse that Profile, and its owner keeps the namespace and can run pods as the
// caller, which every user namespace admits at L4 (finding 3 of internal/safety/FINDINGS-2.md).
func TestCheckReportsASidecarCallerInAProfilesNamespace(t *testing.T) {
	t.Parallel()
	cfg := fixture.Config(t, `authorization:
  platformCallers:
  - {name: notebook-controller, principal: cluster.local/ns/kubeflow/sa/notebook-controller-service-account, methods: [GET], paths: ["*/api/kernels"]}
  - {name: batch-scraper, principal: cluster.local/ns/team-a/sa/default, dataPlane: sidecar}
`)
	userNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a",
		Annotations: map[string]string{ownership.OwnerAnnotation: "mallory@example.com"},
		Labels: map[string]string{"istio-injection": "enabled", "pod-security.kubernetes.io/enforce": "baseline",
			"app.kubernetes.io/part-of": "kubeflow-profile"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Profile", Name: "team-a", UID: "u-1", Controller: ptr.To(true)}},
	}}
	pod := fixture.MeshPod("team-a", "default-0", "default", fixture.SidecarPod)
	report, err := platform.Check(context.Background(), healthyPlatform(t, cfg, userNS, pod, ingressPod(t, cfg, "10.42.0.9")), cfg)
	require.NoError(t, err)
	require.Len(t, report.Findings, 1)
	f := report.Findings[0]
	assert.Equal(t, platform.FindingTrustedNamespaceUserControlled, f.Kind)
	assert.Equal(t, "batch-scraper", f.What)
	assert.Contains(t, f.Problem, "namespace team-a is a user's (Profile team-a controls it)")
}
