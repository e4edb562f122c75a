package waypoint_test

import (
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeflow-ambient/profile-plugins/plugin"
	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
	"github.com/kubeflow-ambient/profile-plugins/waypoint"
)

func ExampleGateway() {
	cfg := config.Default()
	out, _ := plugin.EncodeYAML(plugin.NewScheme(), waypoint.Gateway(cfg, "alice"))
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
	//   infrastructure:
	//     parametersRef:
	//       group: ""
	//       kind: ConfigMap
	//       name: waypoint-seccomp
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

	observed := plugin.Observed{Objects: []client.Object{waypoint.ProgrammedGateway(cfg, "alice")}}
	ready, _ = waypoint.Ready(observed, want)
	fmt.Println(ready)
	// Output:
	// false does not exist yet
	// true
}
