// JSON: histories, matrices and anything else the CLI prints with --json,
// indented the same way everywhere.

package render

import (
	"encoding/json"
	"io"
)

// JSON writes v as indented JSON followed by a newline.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
