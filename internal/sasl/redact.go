package sasl

import (
	"fmt"
	"io"
	"log/slog"
)

// redacted replaces a password wherever a value of this package is printed.
const redacted = "[REDACTED]"

// secret holds a password. The distinct type exists so that a password which
// escapes through reflection-based printing of an enclosing struct still
// prints as [redacted] instead of its value.
type secret string

// String implements [fmt.Stringer] and never reveals the password.
func (secret) String() string { return redacted }

// GoString implements [fmt.GoStringer] so %#v does not bypass String.
func (secret) GoString() string { return `"` + redacted + `"` }

// Format implements [fmt.Formatter] because verbs such as %d or %x would
// otherwise print the underlying string.
func (s secret) Format(f fmt.State, verb rune) { formatSafe(f, verb, s.String(), s.GoString()) }

// LogValue implements [slog.LogValuer] so structured logs are redacted too.
func (secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText implements [encoding.TextMarshaler] so encoders that serialize
// configuration (JSON, YAML, ...) emit the placeholder, not the password.
func (secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// formatSafe is the single Format implementation for every type here that
// holds credentials. Implementing fmt.Formatter (rather than only String) is
// what guarantees fmt never falls back to printing struct fields, whatever
// the verb or flags. Those methods use value receivers so that a copy of the
// struct (for example one reached through reflect) is redacted as well.
func formatSafe(f fmt.State, verb rune, plain, goSyntax string) {
	switch verb {
	case 'v':
		if f.Flag('#') {
			io.WriteString(f, goSyntax)
			return
		}
		fmt.Fprintf(f, fmt.FormatString(f, verb), plain)
	case 's', 'q', 'x', 'X':
		fmt.Fprintf(f, fmt.FormatString(f, verb), plain)
	default:
		io.WriteString(f, plain)
	}
}
