package v1alpha1_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"

	config "github.com/kubeflow-ambient/profile-plugins/config/v1alpha1"
)

// ValidateIdentity at each edge of what it refuses: every refusal names the path and quotes the
// value, and says why, so the message tells which rule fired.
func TestValidateIdentity(t *testing.T) {
	const (
		control    = "a control character"
		comma      = "a comma"
		format     = "an invisible format character"
		space      = "white space other than the ASCII space"
		hidden     = "not displayed"
		unreadable = "unassigned, private-use or separator"
		ends       = "must not start or end with white space"
		everyone   = "it would match every caller"
		suffix     = "a suffix match"
		prefix     = "a prefix match"
	)
	cases := []struct {
		name, value string
		want        string // part of the one error; "" when accepted
	}{
		{"e-mail", "alice@example.com", ""},
		{"inner ASCII space", "Alice Smith", ""},
		{"inner star", "a*b@example.com", ""},
		{"printable ASCII edges", "!~", ""},
		{"first printable after C1", "\u00a1alice", ""},
		{"visible non-ASCII", "jos\u00e9@example.com", ""},
		{"empty", "", "Required value"},
		{"NUL", "a\x00b", control},
		{"unit separator 0x1f", "a\x1fb", control},
		{"LF", "a\nb", control},
		{"DEL 0x7f", "a\x7fb", control},
		{"C1 0x80", "a\u0080b", control},
		{"C1 0x9f", "a\u009fb", control},
		{"no-break space 0xa0", "a\u00a0b", space},
		{"comma", "a,b", comma},
		{"zero-width space", "a\u200bb", format},
		{"soft hyphen", "a\u00adb", format},
		{"em space", "a\u2003b", space},
		{"line separator", "a\u2028b", space},
		{"Hangul filler", "a\u3164b", hidden},
		{"variation selector", "a\ufe0fb", hidden},
		{"braille blank", "a\u2800b", hidden},
		{"private use", "a\ue000b", unreadable},
		{"unassigned", "a\u0378b", unreadable},
		{"invalid UTF-8", "a\xffb", "must be valid UTF-8"},
		{"leading space", " alice", ends},
		{"trailing space", "alice ", ends},
		{"star", "*", everyone},
		{"leading star", "*@example.com", suffix + `: it would match every value ending in "@example.com"`},
		{"trailing star", "alice@*", prefix + `: it would match every value starting with "alice@"`},
		{"stars at both ends", "*a*", suffix + `: it would match every value ending in "a*"`},
	}
	path := field.NewPath("spec", "owner", "name")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := config.ValidateIdentity(path, tc.value)
			if tc.want == "" {
				assert.Empty(t, errs)
				return
			}
			if assert.Len(t, errs, 1) {
				assert.Contains(t, errs[0].Error(), "spec.owner.name")
				assert.Contains(t, errs[0].Error(), tc.want)
			}
		})
	}
}

// MaxIdentityLength is the last length accepted.
func TestValidateIdentityLength(t *testing.T) {
	path := field.NewPath("contributor", "user")
	longest := strings.Repeat("a", config.MaxIdentityLength-len("@example.com")) + "@example.com"
	assert.Empty(t, config.ValidateIdentity(path, longest))
	errs := config.ValidateIdentity(path, "a"+longest)
	if assert.Len(t, errs, 1) {
		assert.Equal(t, field.ErrorTypeTooLong, errs[0].Type)
		assert.Contains(t, errs[0].Error(), "contributor.user")
	}
}
