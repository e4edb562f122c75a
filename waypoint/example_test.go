package waypoint_test

import (
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/runner"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

func ExampleGateway() {
	cfg := config.Default()
	out, _ := runner.EncodeYAML(runner.NewScheme(), waypoint.Gateway(cfg, "alice"))
	os.Stdout.Write(out)
	// Output:
	// apiVersion: gateway.networking.k8s.io/v1
	// kind: Gateway
	// metadata:
	//   labels:
	//     istio.io/waypoint-for: service
	//   name: waypoint
	//   namespace: alice
	// spec:
	//   gatewayClassName: istio-waypoint
	//   listeners:
	//   - name: mesh
	//     port: 15008
	//     protocol: HBONE
}

func ExampleReady() {
	cfg := config.Default()
	want := waypoint.Gateway(cfg, "alice")

	ready, why := waypoint.Ready(plugin.Observed{}, want)
	fmt.Println(ready, why)

	// The waypoint as the runner applied it (marked as the plugin's), with what istiod writes once
	// it runs: Programmed for this generation, and an address.
	programmed := waypoint.Gateway(cfg, "alice")
	programmed.Labels[plugin.ManagedByLabel] = plugin.ManagedByValue
	programmed.Labels[plugin.PluginLabel] = waypoint.PluginName
	programmed.Generation = 1
	programmed.Status.Conditions = []metav1.Condition{{Type: "Programmed", Status: metav1.ConditionTrue, ObservedGeneration: 1}}
	programmed.Status.Addresses = []gatewayv1.GatewayStatusAddress{{Value: "10.96.10.10"}}
	observed := plugin.Observed{Objects: []client.Object{programmed}}
	ready, _ = waypoint.Ready(observed, want)
	fmt.Println(ready)
	// Output:
	// false does not exist yet
	// true
}

// ClassDefaults is applied once per cluster, by an admin, into istiod's namespace.
func ExampleClassDefaults() {
	cm, err := waypoint.ClassDefaults(config.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := runner.EncodeYAML(runner.NewScheme(), cm)
	os.Stdout.Write(out)
	// Output:
	// apiVersion: v1
	// data:
	//   deployment: |
	//     spec:
	//       template:
	//         spec:
	//           containers:
	//           - name: istio-proxy
	//             resources:
	//               limits:
	//                 cpu: "2"
	//                 memory: 1Gi
	//               requests:
	//                 cpu: 100m
	//                 memory: 128Mi
	//           securityContext:
	//             seccompProfile:
	//               type: RuntimeDefault
	// kind: ConfigMap
	// metadata:
	//   labels:
	//     app.kubernetes.io/managed-by: profile-plugins
	//     gateway.istio.io/defaults-for-class: istio-waypoint
	//     profile-plugins.kubeflow-ambient.io/plugin: waypoint
	//   name: profile-plugins-waypoint-class-defaults
	//   namespace: istio-system
}

// A platform check reads the class defaults ConfigMap istiod uses (the oldest one labelled for
// the class in istiod's namespace) and asks whether it hardens the waypoint pod.
func ExampleSetsSeccompDefault() {
	cm, _ := waypoint.ClassDefaults(config.Default())
	fmt.Println(waypoint.SetsSeccompDefault(cm))

	helmDefaults := &corev1.ConfigMap{Data: map[string]string{"deployment": "spec:\n  replicas: 2\n"}}
	fmt.Println(waypoint.SetsSeccompDefault(helmDefaults))
	// Output:
	// true
	// false
}
