package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError is the root's FlagErrorFunc: it rewords what pflag's number,
// duration and boolean parsers say ("strconv.ParseInt: parsing \"abc\":
// invalid syntax") as what the flag expects. Other errors, including those
// of riffle's own flag types, already say it.
func flagError(_ *cobra.Command, err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	f := ive.GetFlag()
	want := expectation(f.Value.Type(), errors.Unwrap(ive))
	if want == "" {
		return err
	}
	name := "--" + f.Name
	if f.Shorthand != "" {
		name = "-" + f.Shorthand + ", " + name
	}
	return fmt.Errorf("invalid argument %q for %q flag: %s", ive.GetValue(), name, want)
}

// expectation says what a flag of pflag type typ wants, given why the
// value was rejected; "" when the cause says it already.
func expectation(typ string, cause error) string {
	var ne *strconv.NumError
	switch {
	case typ == "duration":
		return "want a duration such as 500ms, 10s or 1m30s"
	case !errors.As(cause, &ne):
		return ""
	case typ == "bool":
		return "want true or false"
	case strings.HasPrefix(typ, "float"):
		return "want a number"
	case strings.HasSuffix(typ, "Slice"):
		return "want whole numbers separated by commas, such as 0,1,2"
	}
	bits := 64
	if n, err := strconv.Atoi(strings.TrimPrefix(typ, "int")); err == nil {
		bits = n
	}
	if errors.Is(ne.Err, strconv.ErrRange) {
		return fmt.Sprintf("out of range: want a whole number from %d to %d", -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
	}
	return "want a whole number"
}

// usageDefault hides a flag's default from help, for flags whose usage
// says what leaving them out means: pflag would add "(default -1)" or
// "(default [])" after it.
type usageDefault struct{ pflag.Value }

// defaultInUsage marks the named flags of fs as usageDefault.
func defaultInUsage(fs *pflag.FlagSet, names ...string) {
	for _, n := range names {
		f := fs.Lookup(n)
		f.Value = usageDefault{f.Value}
		f.DefValue = ""
	}
}
