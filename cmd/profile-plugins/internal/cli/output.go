package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Output formats of -o.
const (
	Text = "text"
	YAML = "yaml"
	JSON = "json"
)

// CheckFormat refuses an -o value outside allowed, naming the flag and the choices.
func CheckFormat(format string, allowed ...string) error {
	if slices.Contains(allowed, format) {
		return nil
	}
	choices := strings.Join(allowed, " or ")
	if len(allowed) > 2 {
		choices = strings.Join(allowed[:len(allowed)-1], ", ") + " or " + allowed[len(allowed)-1]
	}
	return fmt.Errorf("-o %q: must be %s", format, choices)
}

// JSONList turns a multi-document YAML stream of objects (what runner.EncodeYAML and
// Rendering.YAML write) into one JSON List, the form `kubectl get -o json` gives several objects
// in; `kubectl apply -f` takes either. Keys are sorted, numbers kept as written.
func JSONList(stream []byte) ([]byte, error) {
	list := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []any  `json:"items"`
	}{APIVersion: "v1", Kind: "List", Items: []any{}}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		// Decoded again, so MarshalJSON writes the strings unescaped, as in the YAML.
		var item any
		js, err := yaml.YAMLToJSON(doc)
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.UseNumber()
			err = dec.Decode(&item)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(list.Items)+1, err)
		}
		list.Items = append(list.Items, item)
	}
	return MarshalJSON(list)
}

// MarshalJSON is v as indented JSON with a final newline, leaving <, > and & as they are (paths
// and selectors read better that way).
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarshalYAML is v as YAML, through its JSON form, so field names are the JSON ones.
func MarshalYAML(v any) ([]byte, error) {
	return yaml.Marshal(v)
}
