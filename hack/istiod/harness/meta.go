package harness

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// metaItems are the items of a typed list as client objects.
func metaItems(l client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, fmt.Errorf("reading the items of %T: %w", l, err)
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("item %T of %T is not an object", o, l)
		}
		out = append(out, co)
	}
	return out, nil
}
