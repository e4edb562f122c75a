package runner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestCRDNameSpellsThePluralsOfTheKindsThePluginsWrite(t *testing.T) {
	t.Parallel()
	for kind, want := range map[schema.GroupVersionKind]string{
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "Gateway"}:     "gateways.gateway.networking.k8s.io",
		{Group: "security.istio.io", Version: "v1", Kind: "AuthorizationPolicy"}: "authorizationpolicies.security.istio.io",
		{Group: "networking.istio.io", Version: "v1", Kind: "Sidecar"}:           "sidecars.networking.istio.io",
		{Group: "example.io", Version: "v1", Kind: "Key"}:                        "keys.example.io",
		{Group: "example.io", Version: "v1", Kind: "Class"}:                      "classes.example.io",
		{Group: "example.io", Version: "v1", Kind: "Y"}:                          "ies.example.io", // no letter before the y to look at
	} {
		assert.Equal(t, want, crdName(kind))
	}
}
