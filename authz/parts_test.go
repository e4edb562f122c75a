package authz_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
)

// Appending to one list of a policy must not write into another: the lists of one policy share
// storage, so each must end where its capacity ends.
func TestAppendingToAListChangesNoOtherList(t *testing.T) {
	cfg := fixture.Config(t, `authorization:
  userIdPrefix: "id:"
  platformCallers:
  - {name: ui, principal: cluster.local/ns/kubeflow/sa/ml-pipeline-ui, onBehalfOfUser: true}
  - {name: culler, principal: cluster.local/ns/kubeflow/sa/culler, methods: [GET, HEAD], paths: ["*/api/kernels"], ports: [8888]}
  - {name: katib, principal: cluster.local/ns/kubeflow/sa/katib-controller, dataPlane: sidecar, ports: [6789, 6790]}
  l4Exceptions:
  - {namespaces: [monitoring, logging], ports: [9090, 15020]}
  - {ipBlocks: [10.8.0.0/24], ports: [9091]}
`)
	owner, err := authz.OwnerPolicy(cfg, ns, owner)
	require.NoError(t, err)
	contributor, err := authz.ContributorPolicy(cfg, ns, "bob@example.com", authz.RoleEdit)
	require.NoError(t, err)
	for _, pol := range []*istiosecurityv1.AuthorizationPolicy{owner, authz.OwnerlessPolicy(cfg, ns), authz.ZtunnelPolicy(cfg, ns), contributor} {
		before := policyJSON(t, pol)
		lists := stringLists(reflect.ValueOf(&pol.Spec).Elem())
		require.NotEmpty(t, lists)
		for _, l := range lists {
			was := l.Interface().([]string)
			l.Set(reflect.ValueOf(append(was, "appended")))
			l.Set(reflect.ValueOf(was))
			assert.Equal(t, before, policyJSON(t, pol), "%s: appending to %q changed another list", pol.Name, was)
		}
	}
}

func policyJSON(t *testing.T, pol *istiosecurityv1.AuthorizationPolicy) string {
	t.Helper()
	out, err := json.Marshal(pol)
	require.NoError(t, err)
	return string(out)
}

// stringLists finds every non-empty []string under v, through pointers, slices and exported fields.
func stringLists(v reflect.Value) []reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return stringLists(v.Elem())
		}
	case reflect.Struct:
		var out []reflect.Value
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, stringLists(v.Field(i))...)
			}
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.String {
			if v.Len() > 0 {
				return []reflect.Value{v}
			}
			return nil
		}
		var out []reflect.Value
		for i := range v.Len() {
			out = append(out, stringLists(v.Index(i))...)
		}
		return out
	}
	return nil
}
