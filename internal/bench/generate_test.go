package bench

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	plugins "github.com/kubeflow-ambient/profile-plugins"
	"github.com/kubeflow-ambient/profile-plugins/authz"
	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

func modeConfig(mode config.MeshMode) *config.Config {
	cfg := config.Default()
	cfg.Mesh.Mode = mode
	return cfg
}

func target(cfg *config.Config) plugin.Target {
	ns := "kubeflow-user-example-com"
	return plugin.Target{
		Namespace: ns, Owner: "user@example.com",
		Profile:  &profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: ns, UID: "u"}, Spec: profilev1.ProfileSpec{Owner: fixture.User("user@example.com")}},
		Observed: plugin.Observed{Objects: []client.Object{fixture.ProgrammedGateway(cfg, ns)}},
	}
}

// BenchmarkGenerate measures each generator's Generate alone.
func BenchmarkGenerate(b *testing.B) {
	for _, mode := range []config.MeshMode{config.ModeAmbient, config.ModeSidecar} {
		cfg := modeConfig(mode)
		podSecurity, err := pss.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range []plugin.Plugin{authz.New(cfg), waypoint.New(cfg), podSecurity} {
			b.Run(p.Name()+"/"+string(mode), func(b *testing.B) {
				t := target(cfg)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.Generate(t); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFullSet measures one namespace with every plugin: "generate" is the plugins' Generate
// alone; "render" adds what the runner computes before it talks to the API server (the apply
// bodies: JSON form, managed labels, owner reference).
func BenchmarkFullSet(b *testing.B) {
	for _, mode := range []config.MeshMode{config.ModeAmbient, config.ModeSidecar} {
		cfg := modeConfig(mode)
		ps, err := plugins.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		s := runner.NewScheme()
		b.Run("generate/"+string(mode), func(b *testing.B) {
			t := target(cfg)
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range ps {
					if _, err := p.Generate(t); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run("render/"+string(mode), func(b *testing.B) {
			t := target(cfg)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := runner.Render(s, ps, t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
