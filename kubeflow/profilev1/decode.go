package profilev1

import (
	"bytes"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ErrDuplicatePlugin is returned when a Profile lists the same plugin kind twice, which would make
// the choice between the entries arbitrary.
var ErrDuplicatePlugin = errors.New("plugin kind listed more than once")

// DecodePluginSpec finds the spec.plugins entry whose kind is kind and decodes its spec into into,
// strictly: an unknown or duplicated field is an error naming its full path, such as
// `spec.plugins[1].spec.enforce2`. It reports whether an entry was found; an entry without a spec
// decodes as found with into unchanged.
func DecodePluginSpec(p *Profile, kind string, into any) (bool, error) {
	found := -1
	for i, pl := range p.Spec.Plugins {
		if pl.Kind != kind {
			continue
		}
		if found >= 0 {
			return false, fmt.Errorf("profile %q: %s: %w (also %s)", p.Name,
				pluginsPath.Index(i).Child("kind"), ErrDuplicatePlugin, pluginsPath.Index(found))
		}
		found = i
	}
	if found < 0 {
		return false, nil
	}
	raw := p.Spec.Plugins[found].Spec
	if raw == nil || len(bytes.TrimSpace(raw.Raw)) == 0 {
		return true, nil
	}
	path := pluginsPath.Index(found).Child("spec")
	if err := decodeStrict(raw.Raw, into, path); err != nil {
		return true, fmt.Errorf("profile %q: %w", p.Name, err)
	}
	return true, nil
}

var pluginsPath = field.NewPath("spec", "plugins")

// decodeStrict decodes JSON into into and reports unknown and duplicate fields with their path
// under prefix, so the message points at the exact spot in the Profile.
func decodeStrict(data []byte, into any, prefix *field.Path) error {
	where := func(err error) error {
		if prefix == nil {
			return err
		}
		return fmt.Errorf("%s: %w", prefix, err)
	}
	strictErrs, err := kjson.UnmarshalStrict(data, into)
	if err != nil {
		return where(err)
	}
	// sigs.k8s.io/json words these as `unknown field "a.b"`; prefix them with where the document
	// sits. errors.Join of none is nil.
	errs := make([]error, 0, len(strictErrs))
	for _, e := range strictErrs {
		errs = append(errs, where(e))
	}
	return errors.Join(errs...)
}

// ParseYAML decodes one Profile from YAML or JSON, strictly: unknown fields are errors naming
// their path. It checks apiVersion and kind, and that the owner a Kubeflow Profile needs is there.
func ParseYAML(data []byte) (*Profile, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p := &Profile{}
	if err := decodeStrict(js, p, nil); err != nil {
		return nil, err
	}
	var errs field.ErrorList
	if p.APIVersion != GroupVersion.String() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), p.APIVersion, "must be "+GroupVersion.String()))
	}
	if p.Kind != Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), p.Kind, "must be "+Kind))
	}
	errs = append(errs, Validate(p)...)
	for i, pl := range p.Spec.Plugins {
		if pl.Kind == "" {
			errs = append(errs, field.Required(pluginsPath.Index(i).Child("kind"), "selects the plugin"))
		}
	}
	return p, errs.ToAggregate()
}
