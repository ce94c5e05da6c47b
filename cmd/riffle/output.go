package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// outputFormat is the -o/--output flag.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }
func (o *outputFormat) Set(s string) error {
	switch f := outputFormat(strings.ToLower(s)); f {
	case outputTable, outputJSON:
		*o = f
		return nil
	}
	return fmt.Errorf("want table or json")
}

// addOutputFlag adds -o/--output to cmd and returns where it lands.
func addOutputFlag(cmd *cobra.Command) *outputFormat {
	o := outputTable
	cmd.Flags().VarP(&o, "output", "o", "print a table or json (`FORMAT`)")
	return &o
}

// newTable returns a tabwriter for aligned columns; Flush it when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(&trimWriter{w: w}, 0, 0, 2, ' ', 0)
}

// trimWriter drops the spaces at the end of lines, which tabwriter leaves
// when the last cell of a row is empty.
type trimWriter struct {
	w      io.Writer
	spaces int // spaces held back until something other than a newline follows
}

func (t *trimWriter) Write(p []byte) (int, error) {
	var buf bytes.Buffer
	for _, c := range p {
		switch c {
		case ' ':
			t.spaces++
			continue
		case '\n':
			t.spaces = 0
		default:
			buf.WriteString(strings.Repeat(" ", t.spaces))
			t.spaces = 0
		}
		buf.WriteByte(c)
	}
	if _, err := t.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// row writes one tab-separated table row.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	io.WriteString(w, "\n")
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ids formats broker ids as "1,2,3", or "-" for none.
func ids(ns []int32) string {
	if len(ns) == 0 {
		return "-"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(int(n))
	}
	return strings.Join(s, ",")
}

// orEmpty keeps JSON arrays as [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// topicID renders a topic id the way Kafka's tools do (URL-safe base64),
// or "" for the zero id of brokers that have none.
func topicID(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// yesNo renders a flag for tables.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// errText is an error for a table cell or JSON field; "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimPrefix(err.Error(), "riffle: ")
}

// indentWriter prefixes every line written through it, to nest output
// (the demo indents what each step prints).
type indentWriter struct {
	w      io.Writer
	prefix []byte
	midLn  bool // the last write did not end a line
}

func newIndentWriter(w io.Writer, prefix string) *indentWriter {
	return &indentWriter{w: w, prefix: []byte(prefix)}
}

func (iw *indentWriter) Write(p []byte) (int, error) {
	var buf bytes.Buffer
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if !iw.midLn && !bytes.Equal(line, []byte("\n")) {
			buf.Write(iw.prefix)
		}
		buf.Write(line)
		iw.midLn = line[len(line)-1] != '\n'
	}
	if _, err := iw.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}
