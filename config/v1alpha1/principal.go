package v1alpha1

import (
	"errors"
	"fmt"
	"strings"
)

// errPrincipalForm is the one wording of a principal that does not parse, so validation, the
// platform check and the tests' fixtures say the same thing.
var errPrincipalForm = errors.New("must look like <trust domain>/ns/<namespace>/sa/<service account>")

// ParsePrincipal splits an Istio principal into its parts. A principal is a workload's SPIFFE ID
// (spiffe://<trust domain>/ns/<namespace>/sa/<service account>) without the "spiffe://"
// scheme, as Istio writes it in an AuthorizationPolicy's source.principals and as [Principal]
// formats it: for example cluster.local/ns/kubeflow/sa/ml-pipeline-ui.
//
// It checks the form only: five parts separated by '/', "ns" and "sa" in their places, and no
// part empty. The error quotes p; a caller prefixes it with the field path. [ValidatePrincipal]
// also checks the syntax of each part.
func ParsePrincipal(p string) (trustDomain, namespace, serviceAccount string, err error) {
	parts := strings.Split(p, "/")
	if len(parts) != 5 || parts[1] != "ns" || parts[3] != "sa" || parts[0] == "" || parts[2] == "" || parts[4] == "" {
		return "", "", "", fmt.Errorf("%q: %w", p, errPrincipalForm)
	}
	return parts[0], parts[2], parts[4], nil
}

// principalNamespace is the namespace of principal, or "" when it does not parse.
func principalNamespace(principal string) string {
	_, namespace, _, err := ParsePrincipal(principal)
	if err != nil {
		return ""
	}
	return namespace
}
