package v1alpha1_test

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
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

func ExampleValidateIdentity() {
	path := field.NewPath("spec", "owner", "name")
	for _, id := range []string{"alice@example.com", "*@example.com", "ali\u200bce@example.com"} {
		fmt.Println(config.ValidateIdentity(path, id).ToAggregate())
	}
	// Output:
	// <nil>
	// spec.owner.name: Invalid value: "*@example.com": Istio reads a leading '*' as a suffix match: it would match every value ending in "@example.com"; an identity must name exactly one caller
	// spec.owner.name: Invalid value: "ali\u200bce@example.com": must not contain U+200B at byte 3: an invisible format character, which makes a look-alike of another user id
}

func ExampleConfig_Warnings() {
	cfg, err := config.Parse([]byte(`
apiVersion: profile-plugins.kubeflow-ambient.io/v1alpha1
kind: PluginConfig
authorization:
  l4Exceptions:
  - {ipBlocks: [10.42.7.0/24, 10.0.0.0/8], ports: [9091]}
`))
	if err != nil {
		panic(err)
	}
	for _, w := range cfg.Warnings() {
		headline, _, _ := strings.Cut(w, ": the ztunnel policy") // the rest explains what it admits
		fmt.Println(headline)
	}
	// Output:
	// authorization.l4Exceptions[0].ipBlocks[1]: "10.0.0.0/8" is a very wide range
}
