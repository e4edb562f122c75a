package profilev1

import "k8s.io/apimachinery/pkg/runtime"

// The controller generates these with controller-gen; they are written by hand here because the
// types are few and small. TestDeepCopyIsDeep guards them.

// DeepCopyInto copies p into out.
func (p *Profile) DeepCopyInto(out *Profile) {
	*out = *p
	out.TypeMeta = p.TypeMeta
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Spec.DeepCopyInto(&out.Spec)
	p.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of p.
func (p *Profile) DeepCopy() *Profile {
	if p == nil {
		return nil
	}
	out := new(Profile)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *Profile) DeepCopyObject() runtime.Object { return p.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *ProfileSpec) DeepCopyInto(out *ProfileSpec) {
	*out = *s
	out.Owner = s.Owner
	if s.Plugins != nil {
		out.Plugins = make([]Plugin, len(s.Plugins))
		for i := range s.Plugins {
			s.Plugins[i].DeepCopyInto(&out.Plugins[i])
		}
	}
	s.ResourceQuotaSpec.DeepCopyInto(&out.ResourceQuotaSpec)
}

// DeepCopyInto copies p into out.
func (p *Plugin) DeepCopyInto(out *Plugin) {
	*out = *p
	if p.Spec != nil {
		out.Spec = p.Spec.DeepCopy()
	}
}

// DeepCopyInto copies s into out.
func (s *ProfileStatus) DeepCopyInto(out *ProfileStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = append([]ProfileCondition(nil), s.Conditions...)
	}
}

// DeepCopyInto copies l into out.
func (l *ProfileList) DeepCopyInto(out *ProfileList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Profile, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy of l.
func (l *ProfileList) DeepCopy() *ProfileList {
	if l == nil {
		return nil
	}
	out := new(ProfileList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *ProfileList) DeepCopyObject() runtime.Object { return l.DeepCopy() }
