package profilev1_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeflow-ambient/profile-plugins/internal/fixture"
	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

func TestValidateNamesTheFieldNoControllerCanActOn(t *testing.T) {
	cases := []struct {
		name    string
		profile profilev1.Profile
		// want are the parts of the one error; none means valid.
		want []string
	}{
		{name: "valid", profile: profile("team-a", "alice@example.com")},
		{name: "a dot: a Profile's name but no namespace's", profile: profile("team.a", "alice@example.com"),
			want: []string{`metadata.name: Invalid value: "team.a"`, "DNS-1123 label", "must not contain dots"}},
		{name: "64 characters: too long for a namespace", profile: profile(strings.Repeat("a", 64), "alice@example.com"),
			want: []string{"metadata.name", "must be no more than 63 characters"}},
		{name: "no name", profile: profile("", "alice@example.com"), want: []string{"metadata.name: Required value"}},
		{name: "no owner: nothing may be enrolled for it", profile: profile("team-a", ""),
			want: []string{"spec.owner.name: Required value", "nothing is enrolled or labelled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := profilev1.Validate(&tc.profile)
			if len(tc.want) == 0 {
				assert.Empty(t, errs)
				return
			}
			if assert.Len(t, errs, 1) {
				for _, w := range tc.want {
					assert.Contains(t, errs[0].Error(), w)
				}
			}
		})
	}
}

func profile(name, owner string) profilev1.Profile {
	return profilev1.Profile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: profilev1.ProfileSpec{Owner: fixture.User(owner)}}
}
