// Package profilev1 stands in for the profiles controller's own api/v1 package: a second Go type
// for kubeflow.org/v1 Profile, so the fork patch is compiled against a Profile that is not this
// module's.
package profilev1

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the controller's API group and version.
var GroupVersion = schema.GroupVersion{Group: "kubeflow.org", Version: "v1"}

var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Profile{}, &ProfileList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme registers Profile and ProfileList, as the controller's main.go does.
var AddToScheme = schemeBuilder.AddToScheme

// Plugin is one entry of spec.plugins.
type Plugin struct {
	metav1.TypeMeta `json:",inline"`
	Spec            *runtime.RawExtension `json:"spec,omitempty"`
}

// ProfileSpec has the controller's fields.
type ProfileSpec struct {
	Owner             rbacv1.Subject           `json:"owner,omitempty"`
	Plugins           []Plugin                 `json:"plugins,omitempty"`
	ResourceQuotaSpec corev1.ResourceQuotaSpec `json:"resourceQuotaSpec,omitempty"`
}

// ProfileCondition is one status condition.
type ProfileCondition struct {
	Type    string `json:"type,omitempty"`
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// ProfileStatus has the controller's conditions.
type ProfileStatus struct {
	Conditions []ProfileCondition `json:"conditions,omitempty"`
}

// Profile is the controller's Profile.
type Profile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ProfileSpec   `json:"spec,omitempty"`
	Status            ProfileStatus `json:"status,omitempty"`
}

// ProfileList is a list of Profiles.
type ProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Profile `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (p *Profile) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopy copies p.
func (p *Profile) DeepCopy() *Profile {
	out := *p
	p.DeepCopyInto(&out.ObjectMeta)
	p.Spec.ResourceQuotaSpec.DeepCopyInto(&out.Spec.ResourceQuotaSpec)
	out.Spec.Plugins = make([]Plugin, len(p.Spec.Plugins))
	for i, pl := range p.Spec.Plugins {
		out.Spec.Plugins[i] = Plugin{TypeMeta: pl.TypeMeta, Spec: pl.Spec.DeepCopy()}
	}
	out.Status.Conditions = append([]ProfileCondition(nil), p.Status.Conditions...)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (l *ProfileList) DeepCopyObject() runtime.Object {
	out := &ProfileList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopy())
	}
	return out
}
