package harness

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The field managers istiod writes with: Gateway status through the status subresource, the
// waypoint's objects by server-side apply (pilot/pkg/config/kube/gatewaycommon/deploymentcontroller.go).
const (
	IstiodStatusManager = "pilot-discovery"
	IstiodApplyManager  = "istio.io/gateway-controller"
)

// Managers describes obj's managedFields, one "manager operation[/subresource]" each, sorted.
func Managers(obj client.Object) []string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		s := m.Manager + " " + string(m.Operation)
		if m.Subresource != "" {
			s += "/" + m.Subresource
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// ManagedBy reports whether manager wrote some of obj's fields through subresource ("" for the
// object itself).
func ManagedBy(obj client.Object, manager, subresource string) bool {
	return slices.ContainsFunc(obj.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == manager && m.Subresource == subresource
	})
}

// ManagesField reports whether manager owns the field path (dotted, such as "f:status" or
// "f:spec.f:replicas") through subresource.
func ManagesField(obj client.Object, manager, subresource, path string) bool {
	for _, m := range obj.GetManagedFields() {
		if m.Manager != manager || m.Subresource != subresource || m.FieldsV1 == nil {
			continue
		}
		raw := string(m.FieldsV1.Raw)
		if !slices.ContainsFunc(strings.Split(path, "."), func(k string) bool { return !strings.Contains(raw, `"`+k+`"`) }) {
			return true
		}
	}
	return false
}
