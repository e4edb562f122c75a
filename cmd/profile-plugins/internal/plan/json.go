package plan

import (
	"encoding/json"
	"io"

	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
)

// writeJSON prints the Report as indented JSON; its schema is documented on Report.
func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeYAML prints the Report as YAML: the JSON document's fields, in YAML.
func writeYAML(w io.Writer, r *Report) error {
	out, err := cli.MarshalYAML(r)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}
