package pss_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/pss"
)

func ExamplePlugin_Generate() {
	p, err := pss.New(config.Default())
	if err != nil {
		panic(err)
	}
	d, _ := p.Generate(plugin.Target{Namespace: "alice"})
	fmt.Println(d.Labels["pod-security.kubernetes.io/enforce"], d.Labels["pod-security.kubernetes.io/warn"])
	// Output: baseline restricted
}

func ExamplePlugin_Violations() {
	p, _ := pss.New(config.Default())
	hostNetwork := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "debug"},
		Spec:       corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	fmt.Println(p.Violations([]corev1.Pod{hostNetwork}, config.LevelVersion{Level: "baseline", Version: "latest"}))
	// Output: [debug (host namespaces (hostNetwork=true))]
}
