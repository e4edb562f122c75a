package integration

// The eighth look (review8) at 75a8eb8: in sidecar mode, switches istio-cni reads among a pod's
// init containers, values of DISABLE_ENVOY and proxy types the guard did not know, the two
// annotations that reshape the injected sidecar, and a pod Istio never injected
// (cni/pkg/plugin/plugin.go doAddRun, cni/pkg/plugin/kubernetes.go ExtractPodInfo and containers,
// pkg/kube/inject: proxy.istio.io/config becomes the sidecar's proxy config, its proxyMetadata the
// istio-proxy environment; inject.istio.io/templates picks grpc-agent, which runs no Envoy).

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/guard"
	"github.com/kubeflow-ambient/profile-plugins/internal/envtest"
)

// review8Switches are the sidecar-mode changes, each to an injected pod (or, in a template, to one
// with the user's own istio-proxy container, which the injector merges over its own), that make Istio leave the pod's inbound traffic uncaptured or its sidecar unable to
// enforce policy.
func review8Switches() map[string]func(p *corev1.Pod) {
	proxyEnv := func(name, value string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].Env = append(p.Spec.Containers[i].Env, corev1.EnvVar{Name: name, Value: value})
				}
			}
		}
	}
	return map[string]func(p *corev1.Pod){
		// Native sidecars: the injector moves istio-proxy, the pod's own merged in, to the init containers.
		"a native istio-proxy with DISABLE_ENVOY": func(p *corev1.Pod) {
			always := corev1.ContainerRestartPolicyAlways
			p.Spec.Containers = p.Spec.Containers[:1]
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-proxy", Image: "registry.example.com/proxyv2:1",
				RestartPolicy: &always, Args: []string{"proxy", "sidecar"}, Env: []corev1.EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}}})
		},
		"DISABLE_ENVOY=1 (strconv.ParseBool)": proxyEnv("DISABLE_ENVOY", "1"),
		"DISABLE_ENVOY=True":                  proxyEnv("DISABLE_ENVOY", "True"),
		"istio-proxy with proxy type ingress": func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].Args = []string{"proxy", "ingress"}
				}
			}
		},
		"proxy.istio.io/config with proxyMetadata": func(p *corev1.Pod) {
			p.Annotations["proxy.istio.io/config"] = `{"proxyMetadata":{"DISABLE\u005fENVOY":"true"}}`
		},
		// The injector excludes whatever port the annotation names from the sidecar's capture.
		"status.sidecar.istio.io/port on an application port": func(p *corev1.Pod) {
			p.Annotations["status.sidecar.istio.io/port"] = "8080"
			if _, injected := p.Annotations["traffic.sidecar.istio.io/excludeInboundPorts"]; injected {
				p.Annotations["traffic.sidecar.istio.io/excludeInboundPorts"] = "8080"
			}
		},
		"inject.istio.io/templates grpc-agent": func(p *corev1.Pod) {
			p.Annotations["inject.istio.io/templates"] = "grpc-agent"
		},
	}
}

func TestEighthLookSidecarSwitchesOnPodsAreRefused(t *testing.T) {
	pods := map[string]*corev1.Pod{
		"a pod Istio never injected": podWith(map[string]string{"app.example.com/tier": "web"}),
		// Found by TestTheGuardAdmitsNoGeneratedPodIstioWouldLeaveOpen: istio-cni programs no
		// redirect for a pod without sidecar.istio.io/status, whatever its istio-proxy runs.
		"a pod with its own istio-proxy and no sidecar.istio.io/status": injectedWith(func(p *corev1.Pod) {
			delete(p.Annotations, "sidecar.istio.io/status")
		}),
		"a pod with its own native istio-proxy and no sidecar.istio.io/status": injectedWith(func(p *corev1.Pod) {
			delete(p.Annotations, "sidecar.istio.io/status")
			proxy := p.Spec.Containers[1]
			proxy.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			p.Spec.Containers = p.Spec.Containers[:1]
			p.Spec.InitContainers = append(p.Spec.InitContainers, proxy)
		}),
	}
	for name, change := range review8Switches() {
		pods[name] = injectedWith(func(p *corev1.Pod) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			change(p)
		})
	}
	runReview7(t, map[config.MeshMode]map[string]*corev1.Pod{config.ModeSidecar: pods})
}

// Pods of workloads are created by Kubernetes' controllers, which the guard trusts, before the
// injector: their templates are where these switches must be refused. A plain template with the
// user's own istio-proxy container (resources, say), which the injector will inject, is admitted.
func TestEighthLookSidecarSwitchesOnPodTemplatesAreRefused(t *testing.T) {
	ns := "r8-templates"
	_, member := guardedMember(t, config.ModeSidecar, ns, "member-edit", "r8-kubeflow-edit-deployments",
		[]rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"create", "update", "patch"}}})
	ctx := context.Background()
	deployment := func(name string, change func(p *corev1.Pod)) *appsv1.Deployment {
		p := podWith(map[string]string{}, "istio-proxy")
		if change != nil {
			change(p)
		}
		sel := map[string]string{"app": name}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: p.Annotations}, Spec: p.Spec},
		}}
	}
	istioInit := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "registry.example.com/noop:1"}}
	}
	require.Eventually(t, func() bool {
		err := member.Create(ctx, deployment("probe", istioInit), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.WorkloadsPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses an istio-init container in a template")

	switches := review8Switches()
	switches["an init container named istio-init"] = istioInit
	for name, change := range switches {
		d := deployment(objectName(name), change)
		err := member.Create(ctx, d, client.DryRunAll)
		t.Logf("%s: %v", name, err)
		if assert.Error(t, err, "%s: a template whose pods Istio would leave uncaptured is admitted for a kubeflow-edit member", name) {
			assert.Contains(t, err.Error(), guard.WorkloadsPolicy, "%s: refused, but not by the guard", name)
		}
	}
	assert.NoError(t, member.Create(ctx, deployment("plain", nil), client.DryRunAll), "a plain template is refused")
}

// Istio 1.32's canary waypoint labels send a share of a Service's traffic to another waypoint
// (pilot/pkg/serviceregistry/ambient/waypoints.go getUseWaypointCanary). Another namespace's would
// fail closed at the ztunnel policy, yet take that share from the owner's waypoint: only the
// namespace's own is admitted.
func TestCanaryWaypointLabelsNameOnlyTheNamespacesOwnWaypoint(t *testing.T) {
	env := envtest.StartFresh(t, 0)
	ctx := context.Background()
	cfg := installGuard(t, env.Client, config.ModeAmbient)
	ns := "r8-canary"
	profileIn(t, env.Client, ns)
	member := bound(t, env, userBinding(ns, "member-edit", editor, nil), "r8-kubeflow-edit-services",
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create", "update", "patch"}}})
	service := func(name string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	elsewhere := map[string]string{"istio.io/use-waypoint-canary": "waypoint", "istio.io/use-waypoint-canary-namespace": "attacker"}
	require.Eventually(t, func() bool {
		err := member.Create(ctx, service("probe", elsewhere), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), guard.ServicesPolicy)
	}, 30*time.Second, 200*time.Millisecond, "the guard takes effect and refuses another namespace's canary waypoint")
	guardDenied(t, member.Create(ctx, service("other-name", map[string]string{"istio.io/use-waypoint-canary": "canary"}), client.DryRunAll),
		guard.ServicesPolicy, "istio.io/use-waypoint-canary=canary sends a share of the traffic past this namespace's waypoint")
	require.NoError(t, member.Create(ctx, service("own", map[string]string{
		"istio.io/use-waypoint-canary": cfg.Mesh.Waypoint.Name, "istio.io/use-waypoint-canary-namespace": ns,
	}), client.DryRunAll), "the namespace's own waypoint as canary is refused")
	require.NoError(t, member.Create(ctx, service("none", map[string]string{"istio.io/use-waypoint-canary": "none"}), client.DryRunAll),
		"no canary is refused")
}
