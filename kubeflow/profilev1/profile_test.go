package profilev1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubeflow-ambient/profile-plugins/kubeflow/profilev1"
)

const valid = `
apiVersion: kubeflow.org/v1
kind: Profile
metadata:
  name: kubeflow-user-example-com
spec:
  owner: {kind: User, name: user@example.com}
  plugins:
  - kind: WorkloadIdentity
    spec: {gcpServiceAccount: x@y.iam.gserviceaccount.com}
  - kind: PodSecurity
    spec: {enforce: restricted}
`

type podSecuritySpec struct {
	Enforce string `json:"enforce"`
}

func TestParseAndDecodePluginSpec(t *testing.T) {
	p, err := profilev1.ParseYAML([]byte(valid))
	require.NoError(t, err)
	assert.Equal(t, "user@example.com", p.Spec.Owner.Name)

	var spec podSecuritySpec
	found, err := profilev1.DecodePluginSpec(p, "PodSecurity", &spec)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "restricted", spec.Enforce)

	found, err = profilev1.DecodePluginSpec(p, "Absent", &spec)
	require.NoError(t, err)
	assert.False(t, found)
}

func TestBadProfiles(t *testing.T) {
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown field", "apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: a}\nspec: {owner: {name: a@b.c}, ownr: {}}\n", []string{`unknown field "spec.ownr"`}},
		{"wrong apiVersion", "apiVersion: kubeflow.org/v2\nkind: Profile\nmetadata: {name: a}\nspec: {owner: {name: a@b.c}}\n", []string{"apiVersion", `"kubeflow.org/v2"`}},
		{"wrong kind", "apiVersion: kubeflow.org/v1\nkind: Namespace\nmetadata: {name: a}\nspec: {owner: {name: a@b.c}}\n", []string{"kind", `"Namespace"`}},
		{"no name", "apiVersion: kubeflow.org/v1\nkind: Profile\nspec: {owner: {name: a@b.c}}\n", []string{"metadata.name"}},
		{"name not a namespace", "apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: Alice.Smith}\nspec: {owner: {name: a@b.c}}\n", []string{"metadata.name", `"Alice.Smith"`}},
		{"no owner", "apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: a}\nspec: {}\n", []string{"spec.owner.name"}},
		{"plugin without kind", "apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: a}\nspec: {owner: {name: a@b.c}, plugins: [{spec: {}}]}\n", []string{"spec.plugins[0].kind"}},
		{"wrong type", "apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: a}\nspec: {owner: {name: [a]}}\n", []string{"spec.owner.name"}},
		{"not yaml", "apiVersion: [", []string{"profile"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := profilev1.ParseYAML([]byte(tc.doc))
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestDecodePluginSpecIsStrict(t *testing.T) {
	cases := []struct {
		name, plugins string
		want          string
	}{
		{"unknown field", `[{kind: PodSecurity, spec: {enforce: baseline, enforc: privileged}}]`, `spec.plugins[0].spec: unknown field "enforc"`},
		{"wrong type", `[{kind: Other}, {kind: PodSecurity, spec: {enforce: 3}}]`, `spec.plugins[1].spec`},
		{"listed twice", `[{kind: PodSecurity, spec: {}}, {kind: PodSecurity, spec: {}}]`, `spec.plugins[1].kind: plugin kind listed more than once (also spec.plugins[0])`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := profilev1.ParseYAML([]byte("apiVersion: kubeflow.org/v1\nkind: Profile\nmetadata: {name: a}\nspec: {owner: {name: a@b.c}, plugins: " + tc.plugins + "}\n"))
			require.NoError(t, err)
			_, err = profilev1.DecodePluginSpec(p, "PodSecurity", &podSecuritySpec{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), `profile "a"`)
		})
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	p, err := profilev1.ParseYAML([]byte(valid))
	require.NoError(t, err)
	p.Status.Conditions = []profilev1.ProfileCondition{{Type: "Ready", Status: "True"}}
	p.Labels = map[string]string{"a": "b"}

	c := p.DeepCopyObject().(*profilev1.Profile)
	require.Equal(t, p, c)
	c.Spec.Plugins[1].Spec.Raw[0] = 'X'
	c.Status.Conditions[0].Status = "False"
	c.Labels["a"] = "changed"
	assert.NotEqual(t, byte('X'), p.Spec.Plugins[1].Spec.Raw[0])
	assert.Equal(t, "True", p.Status.Conditions[0].Status)
	assert.Equal(t, "b", p.Labels["a"])

	list := &profilev1.ProfileList{Items: []profilev1.Profile{*p}}
	lc := list.DeepCopyObject().(*profilev1.ProfileList)
	lc.Items[0].Spec.Owner.Name = "other"
	assert.Equal(t, "user@example.com", list.Items[0].Spec.Owner.Name)
}

func TestSchemeKnowsProfile(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, profilev1.AddToScheme(s))
	gvks, _, err := s.ObjectKinds(&profilev1.Profile{})
	require.NoError(t, err)
	assert.Equal(t, "kubeflow.org/v1, Kind=Profile", gvks[0].String())
}
