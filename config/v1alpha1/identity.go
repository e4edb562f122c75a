package v1alpha1

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxIdentityLength bounds an identity in bytes; e-mail addresses stop at 254.
const MaxIdentityLength = 256

// ValidateIdentity checks a value that an AuthorizationPolicy compares with who is calling: a
// user id (a Profile owner, a contributor, the user-id prefix) or a principal, namespace or
// service account of the configuration. Such a value must mean exactly itself, to Istio and to a
// person reading it, so it must be:
//
//   - without a '*' at either end: in a policy value Istio reads "*" as "any value", "*x" as
//     "ends with x" and "x*" as "starts with x" (istio/istio pilot/pkg/security/authz/matcher,
//     HeaderMatcher in header.go and StringMatcherWithPrefix in string.go), so an owner
//     "*@example.com" would admit a whole domain;
//   - without control characters (CR or LF would split the header) and commas (a proxy joins
//     repeated headers with commas, so "a,b" could match a forged pair);
//   - without invisible characters, which make a look-alike of another user: Unicode format
//     characters (category Cf: zero-width space and joiners, bidi controls, the byte order mark,
//     the soft hyphen), the other default-ignorable code points (fillers, variation selectors),
//     unassigned and private-use code points, line and paragraph separators, and every white
//     space but the ASCII space;
//   - without white space at either end: proxies trim it from header values, so the value could
//     never match;
//   - valid UTF-8 (anything else is mangled on its way into the policy), not empty, and at most
//     MaxIdentityLength bytes.
//
// Look-alikes made of visible characters (a Cyrillic "а" for a Latin "a") are not refused: the
// identity provider decides which addresses exist. The error names path and quotes v.
func ValidateIdentity(path *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if len(v) > MaxIdentityLength {
		return field.ErrorList{field.TooLong(path, v, MaxIdentityLength)}
	}
	if !utf8.ValidString(v) {
		return field.ErrorList{field.Invalid(path, v, "must be valid UTF-8")}
	}
	for i, r := range v {
		if msg := refusedRune(r); msg != "" {
			return field.ErrorList{field.Invalid(path, v, fmt.Sprintf("must not contain %U at byte %d: %s", r, i, msg))}
		}
	}
	if strings.TrimSpace(v) != v {
		return field.ErrorList{field.Invalid(path, v, "must not start or end with white space: proxies trim it, so the policy would never match")}
	}
	if msg := wildcardMeaning(v); msg != "" {
		return field.ErrorList{field.Invalid(path, v, msg)}
	}
	return nil
}

// refusedRune says why r may not be part of an identity, or "" when it may. The checks are ifs in
// order, not switch cases, so that mutation testing (make mutate) sees and tests each condition.
func refusedRune(r rune) string {
	if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
		return "a control character (CR or LF would split the header)"
	}
	if r == ' ' {
		return ""
	}
	if r == ',' {
		return "a comma (header values are joined with commas)"
	}
	if unicode.Is(unicode.Cf, r) {
		return "an invisible format character, which makes a look-alike of another user id"
	}
	if unicode.IsSpace(r) {
		return "white space other than the ASCII space, which makes a look-alike of another user id"
	}
	if unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Variation_Selector, r) || r == '\u2800' {
		return "a character that is not displayed, which makes a look-alike of another user id"
	}
	if !unicode.IsGraphic(r) {
		return "an unassigned, private-use or separator code point, which no one can read"
	}
	return ""
}

// wildcardMeaning says what Istio would make of v's stars, or "" when v means only itself. A '*'
// inside v is matched literally.
func wildcardMeaning(v string) string {
	const fix = "; an identity must name exactly one caller"
	if v == "*" {
		return `Istio reads "*" as "any value": it would match every caller` + fix
	}
	if rest, ok := strings.CutPrefix(v, "*"); ok {
		return fmt.Sprintf("Istio reads a leading '*' as a suffix match: it would match every value ending in %q%s", rest, fix)
	}
	if rest, ok := strings.CutSuffix(v, "*"); ok {
		return fmt.Sprintf("Istio reads a trailing '*' as a prefix match: it would match every value starting with %q%s", rest, fix)
	}
	return ""
}
