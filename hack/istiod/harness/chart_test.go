package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The injector ConfigMap carries each chart template exactly (as istiod will parse it) and values
// with the released hub and tag; the mesh config is the ambient profile's.
func TestConfigMapsCarryTheChartTemplatesAndTheReleasedImage(t *testing.T) {
	chart := Chart{Dir: mustEnv(t, "ISTIO_CHART"), Namespace: IstiodNamespace, Hub: "docker.io/istio", Tag: "1.30.3"}
	cms, err := chart.ConfigMaps()
	if err != nil {
		t.Fatal(err)
	}
	var injector struct {
		Templates map[string]string `json:"templates"`
	}
	if err := yaml.Unmarshal([]byte(cms[1].Data["config"]), &injector); err != nil {
		t.Fatalf("parsing the injector config: %v", err)
	}
	for _, kv := range injectionTemplates {
		want, err := os.ReadFile(filepath.Join(chart.Dir, "files", kv[1]))
		if err != nil {
			t.Fatal(err)
		}
		if injector.Templates[kv[0]] != strings.TrimSpace(string(want)) {
			t.Errorf("template %s differs from files/%s", kv[0], kv[1])
		}
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(cms[1].Data["values"]), &values); err != nil {
		t.Fatalf("parsing the injector values: %v", err)
	}
	if hub, tag := get(values, "global", "hub"), get(values, "global", "tag"); hub != "docker.io/istio" || tag != "1.30.3" {
		t.Errorf("hub %v tag %v", hub, tag)
	}
	if variant := get(values, "global", "variant"); variant != "distroless" {
		t.Errorf("global.variant %v, want the ambient profile's distroless", variant)
	}
	mesh := cms[0].Data["mesh"]
	for _, want := range []string{"rootNamespace: istio-system", "trustDomain: cluster.local", "discoveryAddress: istiod.istio-system.svc:15012", "ISTIO_META_ENABLE_HBONE"} {
		if !strings.Contains(mesh, want) {
			t.Errorf("mesh config lacks %q:\n%s", want, mesh)
		}
	}
}
