package harness

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Chart is the release istiod's ConfigMaps are rendered as: hub and tag of a released chart (the
// source tree carries a testing hub and tag "latest", which Istio's release build rewrites).
type Chart struct {
	// Dir is manifests/charts/istio-control/istio-discovery of the Istio source.
	Dir string
	// Namespace is istiod's namespace.
	Namespace string
	Hub, Tag  string
}

// injectionTemplates are the chart's injection templates, by the key istiod looks them up with,
// as templates/istiod-injector-configmap.yaml lists them.
var injectionTemplates = [][2]string{
	{"sidecar", "injection-template.yaml"},
	{"gateway", "gateway-injection-template.yaml"},
	{"grpc-simple", "grpc-simple.yaml"},
	{"grpc-agent", "grpc-agent.yaml"},
	{"waypoint", "waypoint.yaml"},
	{"kube-gateway", "kube-gateway.yaml"},
	{"agentgateway", "agentgateway.yaml"},
}

// ConfigMaps renders the two ConfigMaps a Helm install of the chart with the ambient profile puts
// in istiod's namespace and istiod reads at run time: "istio" (mesh config) and
// "istio-sidecar-injector" (the injection templates, the waypoint's among them, and the values
// they read). Only the chart's default branches are rendered (no tracer, meshID, remote pilot or
// Stackdriver); values that would take another branch are refused.
func (c Chart) ConfigMaps() ([]*corev1.ConfigMap, error) {
	values, err := c.values()
	if err != nil {
		return nil, err
	}
	mesh, err := c.meshConfig(values)
	if err != nil {
		return nil, err
	}
	injector, err := c.injectorConfig(values)
	if err != nil {
		return nil, err
	}
	injectorValues, err := json.MarshalIndent(pickInjectorValues(values), "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshalling the injector values: %w", err)
	}
	return []*corev1.ConfigMap{
		c.configMap("istio", map[string]string{"mesh": mesh, "meshNetworks": "networks: {}"}),
		c.configMap("istio-sidecar-injector", map[string]string{"config": injector, "values": string(injectorValues)}),
	}, nil
}

func (c Chart) configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: map[string]string{
			"istio.io/rev": "default", "operator.istio.io/component": "Pilot", "release": "istiod",
			"app.kubernetes.io/name": "istiod", "app.kubernetes.io/part-of": "istio",
		}},
		Data: data,
	}
}

// values are the chart's defaults (values.yaml's _internal_defaults_do_not_set, as
// templates/zzz_profile.yaml reads them), then files/profile-ambient.yaml, then hub and tag.
func (c Chart) values() (map[string]any, error) {
	var file map[string]any
	if err := readYAML(filepath.Join(c.Dir, "values.yaml"), &file); err != nil {
		return nil, err
	}
	values, ok := file["_internal_defaults_do_not_set"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("reading %s: no _internal_defaults_do_not_set", filepath.Join(c.Dir, "values.yaml"))
	}
	var profile map[string]any
	if err := readYAML(filepath.Join(c.Dir, "files", "profile-ambient.yaml"), &profile); err != nil {
		return nil, err
	}
	mergeOverwrite(values, profile)
	mergeOverwrite(values, map[string]any{"global": map[string]any{"hub": c.Hub, "tag": c.Tag}})
	return values, nil
}

// mergeOverwrite is sprig's mergeOverwrite: maps merge recursively, src wins, but an empty src
// value does not replace what dst has.
func mergeOverwrite(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeOverwrite(dm, sm)
				continue
			}
		}
		if _, has := dst[k]; has && empty(v) {
			continue
		}
		dst[k] = v
	}
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// get walks values by keys; a missing key is nil.
func get(values map[string]any, keys ...string) any {
	var cur any = values
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// meshConfig is templates/configmap.yaml's "mesh": trust domain, root namespace, the Prometheus
// metrics provider, the proxy image variant and the discovery address, merged with
// values.meshConfig.
func (c Chart) meshConfig(values map[string]any) (string, error) {
	if tracer := get(values, "global", "proxy", "tracer"); tracer != "none" {
		return "", fmt.Errorf("rendering the mesh config: global.proxy.tracer %v is not rendered here, only none", tracer)
	}
	for _, k := range [][]string{{"global", "meshID"}, {"global", "remotePilotAddress"}} {
		if !empty(get(values, k...)) {
			return "", fmt.Errorf("rendering the mesh config: %s is not rendered here", strings.Join(k, "."))
		}
	}
	if get(values, "telemetry", "v2", "stackdriver", "enabled") == true {
		return "", fmt.Errorf("rendering the mesh config: telemetry.v2.stackdriver is not rendered here")
	}
	root := get(values, "meshConfig", "rootNamespace")
	if empty(root) {
		root = get(values, "global", "istioNamespace")
	}
	mesh := map[string]any{"trustDomain": "cluster.local", "rootNamespace": root}
	if get(values, "telemetry", "enabled") == true && get(values, "telemetry", "v2", "enabled") == true &&
		get(values, "telemetry", "v2", "prometheus", "enabled") == true {
		mesh["defaultProviders"] = map[string]any{"metrics": []any{"prometheus"}}
	}
	defaultConfig := map[string]any{"discoveryAddress": "istiod." + c.Namespace + ".svc:15012"}
	variant := get(values, "global", "proxy", "variant")
	if empty(variant) {
		variant = get(values, "global", "variant")
	}
	if !empty(variant) {
		defaultConfig["image"] = map[string]any{"imageType": variant}
	}
	mesh["defaultConfig"] = defaultConfig
	if user, ok := get(values, "meshConfig").(map[string]any); ok {
		mergeOverwrite(mesh, user)
	}
	out, err := yaml.Marshal(mesh)
	if err != nil {
		return "", fmt.Errorf("marshalling the mesh config: %w", err)
	}
	return string(out), nil
}

// injectorConfig is templates/istiod-injector-configmap.yaml's "config", each template the chart
// file as it is (trimmed, as .Files.Get | trim).
func (c Chart) injectorConfig(values map[string]any) (string, error) {
	if !empty(get(values, "sidecarInjectorWebhook", "defaultTemplates")) || !empty(get(values, "sidecarInjectorWebhook", "templates")) {
		return "", fmt.Errorf("rendering the injector config: custom sidecarInjectorWebhook templates are not rendered here")
	}
	templates := map[string]any{}
	for _, kv := range injectionTemplates {
		b, err := os.ReadFile(filepath.Join(c.Dir, "files", kv[1]))
		if err != nil {
			return "", fmt.Errorf("reading the %s injection template: %w", kv[0], err)
		}
		templates[kv[0]] = strings.TrimSpace(string(b))
	}
	config := map[string]any{
		"defaultTemplates":     []any{"sidecar"},
		"policy":               get(values, "global", "proxy", "autoInject"),
		"alwaysInjectSelector": get(values, "sidecarInjectorWebhook", "alwaysInjectSelector"),
		"neverInjectSelector":  get(values, "sidecarInjectorWebhook", "neverInjectSelector"),
		"injectedAnnotations":  stringMap(get(values, "sidecarInjectorWebhook", "injectedAnnotations")),
		"template":             "{{ Template_Version_And_Istio_Version_Mismatched_Check_Installation }}",
		"templates":            templates,
	}
	out, err := yaml.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("marshalling the injector config: %w", err)
	}
	return string(out), nil
}

func stringMap(v any) map[string]string {
	out := map[string]string{}
	if m, ok := v.(map[string]any); ok {
		for k, e := range m {
			out[k] = fmt.Sprint(e)
		}
	}
	return out
}

// pickInjectorValues is the chart's scoping of the values the templates read: global,
// sidecarInjectorWebhook, revision, pilot (cni, env) and gateways (securityContext, seccompProfile).
func pickInjectorValues(values map[string]any) map[string]any {
	out := pick(values, "global", "sidecarInjectorWebhook", "revision")
	out["pilot"] = pick(values, "cni", "env")
	gateways, _ := values["gateways"].(map[string]any)
	out["gateways"] = pick(gateways, "securityContext", "seccompProfile")
	return out
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return maps.Clone(out)
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}
