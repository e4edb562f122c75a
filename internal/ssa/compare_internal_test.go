package ssa

import (
	"testing"

	securityv1beta1 "istio.io/api/security/v1beta1"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/descriptorpb"
)

// contains decides whether an observed object still holds what the plugin applies, so it decides
// drift: a field the plugin sets that another writer removed or changed is a difference, while
// fields the API server or other writers only added are not.
func TestContainsDecidesDrift(t *testing.T) {
	applied := map[string]any{"spec": map[string]any{
		"action":     "ALLOW",
		"targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
		"selector":   map[string]any{"matchLabels": map[string]any{"app": "x"}},
	}}
	cases := []struct {
		name     string
		observed map[string]any
		want     bool
		at       string
	}{
		{"identical", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, true, ""},
		{"extra defaulted field", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint", "group": "g"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}, "provider": nil,
		}}, true, ""},
		{"targetRefs removed", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs"},
		{"selector removed", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
		}}, false, ".spec.selector"},
		{"action changed", map[string]any{"spec": map[string]any{
			"action": "AUDIT", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.action"},
		{"extra list element", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "waypoint"}, map[string]any{"kind": "Service", "name": "s"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs"},
		{"list element changed", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": []any{map[string]any{"kind": "Gateway", "name": "other"}},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs[0].name"},
		{"list replaced by a map", map[string]any{"spec": map[string]any{
			"action": "ALLOW", "targetRefs": map[string]any{"kind": "Gateway"},
			"selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
		}}, false, ".spec.targetRefs"},
		{"map replaced by a string", map[string]any{"spec": "x"}, false, ".spec"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, at := Contains(tc.observed, applied, "")
			assert.Equal(t, tc.want, ok)
			if !tc.want {
				assert.Equal(t, tc.at, at)
			}
		})
	}
}

// Server-side apply stores no empty map or list, so an empty one the plugin applies is held by an
// object that lacks it; a non-empty one is not.
func TestContainsTreatsOnlyEmptyValuesAsUnset(t *testing.T) {
	for name, tc := range map[string]struct {
		want any
		ok   bool
	}{
		"nil":            {nil, true},
		"empty map":      {map[string]any{}, true},
		"empty list":     {[]any{}, true},
		"non-empty map":  {map[string]any{"a": "b"}, false},
		"non-empty list": {[]any{"a"}, false},
		"empty string":   {"", false},
		"false":          {false, false},
	} {
		t.Run(name, func(t *testing.T) {
			ok, _ := Contains(map[string]any{}, map[string]any{"f": tc.want}, "")
			assert.Equal(t, tc.ok, ok)
		})
	}
}

func TestToMapStatesTheZeroEnum(t *testing.T) {
	allow := &istiosecurityv1.AuthorizationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	m, err := ToMap(allow)
	require.NoError(t, err)
	assert.Equal(t, "ALLOW", m["spec"].(map[string]any)["action"])

	audit := &istiosecurityv1.AuthorizationPolicy{Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_AUDIT}}
	m, err = ToMap(audit)
	require.NoError(t, err)
	assert.Equal(t, "AUDIT", m["spec"].(map[string]any)["action"])

	// The provider lives in a oneof and stays unset; non-protobuf specs are left alone.
	assert.NotContains(t, m["spec"], "provider")
	m, err = ToMap(&gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{GatewayClassName: "c"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"gatewayClassName": "c", "listeners": nil}, m["spec"])

	assert.Nil(t, protoSpec(nil))
	assert.Nil(t, protoSpec((*istiosecurityv1.AuthorizationPolicy)(nil)))
	assert.Nil(t, protoSpec(istiosecurityv1.AuthorizationPolicy{}), "not addressable")
	assert.Nil(t, protoSpec(&corev1.ConfigMap{}))
	s := "x"
	assert.Nil(t, protoSpec(&s))
	assert.NotNil(t, protoSpec(allow))

	// Only single enums outside a oneof are stated; lists and set fields are left as they are.
	spec := map[string]any{"jstype": "JS_NUMBER"}
	stateEnums(&descriptorpb.FieldOptions{Ctype: descriptorpb.FieldOptions_CORD.Enum()}, spec)
	assert.Equal(t, map[string]any{"jstype": "JS_NUMBER", "retention": "RETENTION_UNKNOWN"}, spec,
		"ctype is set, jstype already present, targets is a list, features a message")
	stateEnums(nil, spec)
}

// Holds is Contains on an object's JSON form: the zero enum the apply body states (action ALLOW)
// is held by an object that leaves it out, another action is not, and the path says where.
func TestHoldsComparesAnObjectWithAnApplyBody(t *testing.T) {
	body := map[string]any{"spec": map[string]any{"action": "ALLOW"}}
	held, at, err := Holds(&istiosecurityv1.AuthorizationPolicy{}, body)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Empty(t, at)

	audit := &istiosecurityv1.AuthorizationPolicy{Spec: securityv1beta1.AuthorizationPolicy{Action: securityv1beta1.AuthorizationPolicy_AUDIT}}
	held, at, err = Holds(audit, body)
	require.NoError(t, err)
	assert.False(t, held)
	assert.Equal(t, ".spec.action", at)

	held, _, err = Holds(func() {}, body)
	assert.Error(t, err, "no JSON form")
	assert.False(t, held)
}

// DesiredHash is stable over map order and fails, rather than hashing part of it, on a body
// encoding/json cannot write.
func TestDesiredHashIsStableAndFailsOnAnUnwritableBody(t *testing.T) {
	a, err := DesiredHash(map[string]any{"kind": "ConfigMap", "data": map[string]any{"x": "1", "y": "2"}})
	require.NoError(t, err)
	b, err := DesiredHash(map[string]any{"data": map[string]any{"y": "2", "x": "1"}, "kind": "ConfigMap"})
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Len(t, a, 16, "eight bytes of sha256, in hex")
	_, err = DesiredHash(map[string]any{"data": make(chan int)})
	assert.Error(t, err)
}
