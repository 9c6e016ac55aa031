// Package render draws what the harness found, as values: a history as a
// text swimlane (Timeline), a Mermaid sequence diagram (Mermaid) or JSON,
// and a verdict matrix as a terminal table (MatrixText), a Markdown table
// (MatrixMarkdown) or a self-contained HTML page (HTML). It never runs
// anything: give it a harness.History or a harness.MatrixResult, from a run
// or read back from JSON. Every renderer names tokens, stamps and keys the
// same way (label.go).
package render
