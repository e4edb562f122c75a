package v1alpha1

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// httpMethod is an upper-case HTTP method token, such as GET or M-SEARCH. Istio compares methods
// case-sensitively, and a '*' would make a prefix or suffix match.
var httpMethod = regexp.MustCompile(`^[A-Z][A-Z0-9_-]*$`)

// validateCallers checks each platform caller, and that the principals and katibRule, which only
// build the default list, do not disagree with a list the admin set.
func (a *Authorization) validateCallers(path *field.Path) field.ErrorList {
	cp := path.Child("platformCallers")
	var errs field.ErrorList
	names := map[string]int{}
	for i, c := range a.PlatformCallers {
		p := cp.Index(i)
		errs = append(errs, c.validate(p)...)
		if first, dup := names[c.Name]; dup && c.Name != "" {
			errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also platformCallers[%d])", c.Name, first)))
		} else {
			names[c.Name] = i
		}
		if c.OnBehalfOfUser {
			continue
		}
		// A principal the policies admit only with the header must not also be admitted without
		// it: ALLOW rules add up, so the rule without the header would win.
		for _, h := range a.headerOnlyPrincipals() {
			if c.Principal == h.principal {
				errs = append(errs, field.Invalid(p.Child("principal"), c.Principal,
					"is "+h.who+", which is admitted only with the user-id header; a caller without onBehalfOfUser would admit it without the header, for every user"))
			}
		}
	}
	return errs
}

// defaultInputsUnchanged refuses principals.pipelinesUI, notebookController, katibController or
// katibRule that differ from their defaults when platformCallers is the admin's own list: they only
// build the default list, so the admin's list wins and the value would be silently ignored.
func (c *Config) defaultInputsUnchanged() field.ErrorList {
	a := &c.Authorization
	if a.CallersAreDefault() {
		return nil
	}
	path := field.NewPath("authorization")
	var errs field.ErrorList
	def := DefaultPrincipals(c.Mesh.TrustDomain)
	wins := func(entry string) string {
		return "only builds the default platformCallers; authorization.platformCallers is set, so it wins and this value would be ignored: " +
			entry + " and leave this field out"
	}
	pp := path.Child("principals")
	for _, f := range []struct{ name, got, want, entry string }{
		{"pipelinesUI", a.Principals.PipelinesUI, def.PipelinesUI, CallerPipelinesUI},
		{"notebookController", a.Principals.NotebookController, def.NotebookController, CallerNotebookController},
		{"katibController", a.Principals.KatibController, def.KatibController, CallerKatibController},
	} {
		if f.got != f.want {
			errs = append(errs, field.Invalid(pp.Child(f.name), f.got, wins(fmt.Sprintf("put the principal in the platformCallers entry (%q)", f.entry))))
		}
	}
	if a.KatibRule != nil && !*a.KatibRule {
		errs = append(errs, field.Invalid(path.Child("katibRule"), false, wins(fmt.Sprintf("leave the %q entry out of platformCallers", CallerKatibController))))
	}
	return errs
}

func (c PlatformCaller) validate(path *field.Path) field.ErrorList {
	errs := dns1123Label(path.Child("name"), c.Name)
	errs = append(errs, ValidatePrincipal(path.Child("principal"), c.Principal)...)
	switch c.DataPlane {
	case CallerAmbient, CallerSidecar:
	default:
		errs = append(errs, field.NotSupported(path.Child("dataPlane"), c.DataPlane, []CallerDataPlane{CallerAmbient, CallerSidecar}))
	}
	if c.OnBehalfOfUser && len(c.Methods)+len(c.Paths)+len(c.Ports) > 0 {
		errs = append(errs, field.Invalid(path.Child("onBehalfOfUser"), true,
			"a caller on behalf of a user joins the ingress gateway's rule (the user-id header), which has no methods, paths or ports; leave them empty"))
	}
	for i, m := range c.Methods {
		if !httpMethod.MatchString(m) {
			errs = append(errs, field.Invalid(path.Child("methods").Index(i), m, "must be an upper-case HTTP method such as GET (Istio compares methods case-sensitively; '*' is a wildcard)"))
		}
	}
	for i, p := range c.Paths {
		if msg := pathProblem(p); msg != "" {
			errs = append(errs, field.Invalid(path.Child("paths").Index(i), p, msg))
		}
	}
	errs = append(errs, validatePorts(path.Child("ports"), c.Ports)...)
	return errs
}

// pathProblem says why Istio would not read p as the admin means it, or "". Istio reads one '*' at
// the end of a path as a prefix match and one at the start as a suffix match, as in KernelsPath
// (istio/istio pilot/pkg/security/authz/model/generator.go, pathGenerator, through PathMatcher in
// matcher/header.go to StringMatcherWithPrefix in matcher/string.go); a '*' anywhere else is a
// literal character, and braces make a path template (security.ContainsPathTemplate).
func pathProblem(p string) string {
	const ends = "must be an absolute path, optionally with one '*' at the end (prefix match), or '*' and the end of a path (suffix match), such as /api/* or */api/kernels"
	switch {
	case p == "" || p == "*":
		return ends + `; leave paths empty for any path`
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "must not contain white space or control characters"
	case strings.ContainsAny(p, "?#"):
		return "must not contain '?' or '#': Istio compares the path without the query or fragment, so it would never match"
	case strings.ContainsAny(p, "{}"):
		return "must not contain '{' or '}': Istio reads them as path templates"
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(p, "*"), "*")
	if strings.HasPrefix(p, "*") && strings.HasSuffix(p, "*") || strings.Contains(inner, "*") {
		return ends
	}
	if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "*") {
		return ends
	}
	return ""
}

// validatePorts checks TCP destination ports.
func validatePorts(path *field.Path, ports []int32) field.ErrorList {
	var errs field.ErrorList
	for i, port := range ports {
		if port < 1 || port > 65535 {
			errs = append(errs, field.Invalid(path.Index(i), port, "must be 1 to 65535"))
		}
	}
	return errs
}

// onBehalfOfUserOnSidecar refuses, in ambient mode, a caller on behalf of users on the sidecar data
// plane. Its calls never pass the waypoint, the only place the user-id header can be checked, so
// admitting it in the ztunnel policy would let it reach every pod of every user namespace for any
// user it forwards (as an L4 exception for the Pipelines UI would, which is refused for the same
// reason). Refused rather than warned: a warning would leave every namespace open meanwhile.
func (c *Config) onBehalfOfUserOnSidecar() field.ErrorList {
	if c.Mesh.Mode != ModeAmbient {
		return nil
	}
	var errs field.ErrorList
	for i, pc := range c.Authorization.PlatformCallers {
		if pc.OnBehalfOfUser && pc.DataPlane == CallerSidecar {
			errs = append(errs, field.Invalid(field.NewPath("authorization", "platformCallers").Index(i).Child("dataPlane"), pc.DataPlane,
				fmt.Sprintf("caller %q forwards requests on behalf of any user, and only the waypoint checks the user-id header; sidecars never send through a waypoint, "+
					"so it could be admitted only at L4, without the header, into every user namespace for every user; "+
					"run its namespace (%s) in ambient (istio.io/dataplane-mode=ambient, no sidecar injection) and set dataPlane \"ambient\"",
					pc.Name, principalNamespace(pc.Principal))))
		}
	}
	return errs
}
