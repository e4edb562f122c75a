package profilev1

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the Profile kind.
var GroupVersion = schema.GroupVersion{Group: "kubeflow.org", Version: "v1"}

// Kind is the Profile kind's name.
const Kind = "Profile"

// Profile is one Kubeflow user namespace: cluster-scoped, and the namespace has its name.
type Profile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProfileSpec   `json:"spec,omitempty"`
	Status ProfileStatus `json:"status,omitempty"`
}

// ProfileSpec is what the Profile's author asks for.
type ProfileSpec struct {
	// Owner is the namespace owner; for a person, Kind "User" and Name their e-mail address.
	Owner rbacv1.Subject `json:"owner,omitempty"`
	// Plugins are per-profile plugin settings, selected by Kind.
	Plugins []Plugin `json:"plugins,omitempty"`
	// ResourceQuotaSpec is the namespace's quota; the controller applies it, not this library.
	ResourceQuotaSpec corev1.ResourceQuotaSpec `json:"resourceQuotaSpec,omitempty"`
}

// Plugin is one spec.plugins entry: Kind selects the plugin, Spec is its free-form settings.
type Plugin struct {
	metav1.TypeMeta `json:",inline"`
	Spec            *runtime.RawExtension `json:"spec,omitempty"`
}

// ProfileStatus is what the controller reports.
type ProfileStatus struct {
	Conditions []ProfileCondition `json:"conditions,omitempty"`
}

// ProfileCondition is the controller's condition shape: no reason, no timestamps.
type ProfileCondition struct {
	Type    string `json:"type,omitempty"`
	Status  string `json:"status,omitempty" description:"status of the condition, one of True, False, Unknown"`
	Message string `json:"message,omitempty"`
}

// ProfileList is a list of Profiles.
type ProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Profile `json:"items"`
}

var (
	// SchemeBuilder registers the Profile types.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Profile{}, &ProfileList{})
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
	// AddToScheme adds the Profile types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
