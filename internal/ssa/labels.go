package ssa

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagedLabelKeys is the label and annotation keys one managedFields entry owns.
func ManagedLabelKeys(e metav1.ManagedFieldsEntry) (labels, annotations []string, err error) {
	var fields struct {
		Metadata struct {
			Labels      map[string]json.RawMessage `json:"f:labels"`
			Annotations map[string]json.RawMessage `json:"f:annotations"`
		} `json:"f:metadata"`
	}
	if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
		return nil, nil, fmt.Errorf("managedFields of %s: %w", e.Manager, err)
	}
	for k := range fields.Metadata.Labels {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			labels = append(labels, key)
		}
	}
	for k := range fields.Metadata.Annotations {
		if key, ok := strings.CutPrefix(k, "f:"); ok {
			annotations = append(annotations, key)
		}
	}
	return labels, annotations, nil
}
