package main

import (
	"encoding/json"
	"io"
)

// writeJSON prints the Report as indented JSON; its schema is documented on Report.
func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
