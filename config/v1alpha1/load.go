package v1alpha1

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Load reads, defaults and validates the configuration file at path. Errors start with the path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes one configuration document strictly, fills in defaults and validates it.
func Parse(data []byte) (*Config, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	strictErrs, err := kjson.UnmarshalStrict(js, c)
	if err != nil {
		return nil, err
	}
	if len(strictErrs) > 0 {
		// These read like `unknown field "mesh.mod"`: the path is in the message.
		return nil, errors.Join(strictErrs...)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func sortByField(errs field.ErrorList) {
	slices.SortStableFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
}
