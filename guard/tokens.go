package guard

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
)

// TokensPolicy refuses, in the managed namespaces, Secrets that Kubernetes fills with a token of
// one of the namespace's ServiceAccounts. Such a token never expires and is no pod's: a
// contributor who made one keeps it after kfam removes their RoleBinding, and with it the roles
// of the ServiceAccount (default-editor holds kubeflow-edit) and, in the mesh, the namespace's
// identity. A pod's projected token ends with the pod. The waypoint's ServiceAccount is the
// waypoint policy's (waypoint/token-secret).
const TokensPolicy = "profile-plugins-guard-tokens"

// tokens is the tokens policy.
func (b builder) tokens() policySpec {
	s := b.spec(TokensPolicy, "namespaceObject", []admissionv1.NamedRuleWithOperations{
		rule("", "v1", []string{"secrets"}, admissionv1.Create, admissionv1.Update),
	})
	isToken := allOf(field("object", "type"), eq("object.type", string(corev1.SecretTypeServiceAccountToken)))
	s.add(Check{ID: "secrets", Asset: AssetServiceAccountTokens,
		Source: "kubernetes pkg/controller/serviceaccount/tokens_controller.go fills a Secret of type " + string(corev1.SecretTypeServiceAccountToken) +
			" with a token that does not expire; kfam's removal of a contributor deletes their RoleBinding only",
		Expression: string(anyOf("!variables.managed", not(isToken), b.tokenSecretOf("object", b.cfg.Mesh.Waypoint.Name))),
		Message:    "a Secret may not hold a ServiceAccount's token in this namespace: it would outlive its maker's access" + ask,
		MessageExpression: "'Secret ' + request.namespace + '/' + object.metadata.name + ': a Secret of type " + string(corev1.SecretTypeServiceAccountToken) +
			" is given a token of its ServiceAccount that never expires, which keeps working after its maker is removed from the namespace; " +
			"run the work in a pod, whose own token ends with it" + ask + "'"})
	return s
}
