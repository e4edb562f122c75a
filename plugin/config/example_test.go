package config_test

import (
	"fmt"

	"github.com/kubeflow-ambient/profile-plugins/plugin/config"
)

func ExampleParse() {
	cfg, err := config.Parse([]byte(`
apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1
kind: PluginConfig
mesh: {mode: ambient, trustDomain: corp.example}
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Mesh.Waypoint.Name, cfg.Authorization.Principals.IngressGateway)

	_, err = config.Parse([]byte(`
apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1
kind: PluginConfig
mesh: {waypoint: {name: none}}
`))
	fmt.Println(err)
	// Output:
	// waypoint corp.example/ns/istio-system/sa/istio-ingressgateway-service-account
	// mesh.waypoint.name: Invalid value: "none": "none" is reserved by Istio to opt out of waypoints
}
