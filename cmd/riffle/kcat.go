package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// kcatMode rewrites a kcat-style command line, where -C or -P stands for
// the subcommand ("riffle -C -b kafka:9092 -t orders -e"), into riffle's
// ("riffle consume -b kafka:9092 -t orders -e"). Any other command line
// comes back as it is. Short flags combine as in pflag ("-Ce" is -C -e),
// and flag values are skipped, so "-K -C" keeps "-C" as the key separator.
func kcatMode(root *cobra.Command, args []string) ([]string, error) {
	lookup := shortAndLong(root)
	mode := ""
	setMode := func(m string) error {
		if mode != "" && mode != m {
			return usageErrorf("-C (consume) and -P (produce) exclude each other")
		}
		mode = m
		return nil
	}
	var rest []string
	first := "" // the first positional argument
	for i := 0; i < len(args); i++ {
		s := args[i]
		switch {
		case s == "--":
			rest = append(rest, args[i:]...)
			i = len(args)
		case s == "--consume" || s == "--produce":
			if err := setMode(s[2:]); err != nil {
				return nil, err
			}
		case strings.HasPrefix(s, "--"):
			rest = append(rest, s)
			if f := lookup(s[2:]); !strings.Contains(s, "=") && needsValue(f) && i+1 < len(args) {
				i++
				rest = append(rest, args[i])
			}
		case len(s) > 1 && s[0] == '-':
			kept, value, err := splitShorts(s, lookup, setMode)
			if err != nil {
				return nil, err
			}
			if kept != "-" {
				rest = append(rest, kept)
			}
			if value && i+1 < len(args) {
				i++
				rest = append(rest, args[i])
			}
		default:
			rest = append(rest, s)
			if first == "" {
				first = s
			}
		}
	}
	if mode == "" {
		return args, nil
	}
	if first == "consume" || first == "produce" {
		return nil, usageErrorf("-C and -P stand for the consume and produce commands: give one or the other (riffle -C -t TOPIC, or riffle consume TOPIC)")
	}
	return append([]string{mode}, rest...), nil
}

// splitShorts takes -C and -P out of a group of short flags ("-Ceo"),
// read as pflag does: bools, then at most one flag that takes the rest of
// the argument as its value, or else the next argument (value is then
// true). kept is what is left of the group ("-" if nothing).
func splitShorts(s string, lookup func(string) *pflag.Flag, setMode func(string) error) (kept string, value bool, err error) {
	out := []byte{'-'}
	shorts := s[1:]
	for i := 0; i < len(shorts); i++ {
		c := shorts[i : i+1]
		if m, ok := map[string]string{"C": "consume", "P": "produce"}[c]; ok {
			if err := setMode(m); err != nil {
				return "", false, err
			}
			continue
		}
		out = append(out, c...)
		if needsValue(lookup(c)) {
			if i == len(shorts)-1 {
				return string(out), true, nil
			}
			return string(out) + shorts[i+1:], false, nil
		}
	}
	return string(out), false, nil
}

// shortAndLong returns a lookup of a flag by long name or shorthand among
// the flags of the root and of consume and produce (which agree on their
// short flags); nil if none has it.
func shortAndLong(root *cobra.Command) func(string) *pflag.Flag {
	sets := []*pflag.FlagSet{root.PersistentFlags(), root.LocalNonPersistentFlags()}
	for _, c := range root.Commands() {
		if c.Name() == "consume" || c.Name() == "produce" {
			sets = append(sets, c.Flags())
		}
	}
	return func(name string) *pflag.Flag {
		name, _, _ = strings.Cut(name, "=")
		for _, fs := range sets {
			if len(name) == 1 {
				if f := fs.ShorthandLookup(name); f != nil {
					return f
				}
			} else if f := fs.Lookup(name); f != nil {
				return f
			}
		}
		return nil
	}
}

// needsValue reports whether f takes a value (a bool does not).
func needsValue(f *pflag.Flag) bool { return f != nil && f.NoOptDefVal == "" }

// property is a client property of kcat (librdkafka) or the Java client
// that -X KEY=VALUE sets: riffle maps it onto one of its flags.
type property struct {
	flag  string                       // the flag it sets; "" for security.protocol
	value func(string) (string, error) // the flag's value for the property's; nil: the same
	note  string                       // for the help, when the value changes
}

// properties are the client properties riffle knows, by librdkafka and
// Java names. Anything else is refused rather than ignored: a property
// riffle dropped silently would be a setting the user thinks is in force.
var properties = map[string]property{
	"bootstrap.servers":                   {flag: "brokers"},
	"metadata.broker.list":                {flag: "brokers"},
	"client.id":                           {flag: "client-id"},
	"security.protocol":                   {},
	"sasl.mechanism":                      {flag: "sasl-mechanism"},
	"sasl.mechanisms":                     {flag: "sasl-mechanism"},
	"sasl.username":                       {flag: "sasl-user"},
	"sasl.password":                       {flag: "sasl-password"},
	"ssl.ca.location":                     {flag: "tls-ca"},
	"ssl.certificate.location":            {flag: "tls-cert"},
	"ssl.key.location":                    {flag: "tls-key"},
	"enable.ssl.certificate.verification": {flag: "tls-insecure", value: negateBool, note: "false is --tls-insecure true"},
	"group.id":                            {flag: "group"},
	"isolation.level":                     {flag: "isolation"},
	"auto.offset.reset":                   {flag: "from", value: offsetReset, note: "earliest or smallest, latest or largest"},
	"acks":                                {flag: "acks", value: acksValue, note: "-1 is all"},
	"request.required.acks":               {flag: "acks", value: acksValue, note: "-1 is all"},
	"compression.type":                    {flag: "compression"},
	"compression.codec":                   {flag: "compression"},
	"linger.ms":                           {flag: "linger", value: milliseconds, note: "in milliseconds"},
	"queue.buffering.max.ms":              {flag: "linger", value: milliseconds, note: "in milliseconds"},
}

// Values of security.protocol.
var securityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// propertiesHelp lists the properties -X takes and the flags they set,
// for the root's help.
func propertiesHelp() string {
	byFlag := map[string][]string{}
	for k, p := range properties {
		f := "--" + p.flag
		if p.flag == "" {
			f = "--tls, --sasl-* (see below)"
		}
		if p.note != "" {
			f += " (" + p.note + ")"
		}
		byFlag[f] = append(byFlag[f], k)
	}
	flags := make([]string, 0, len(byFlag))
	for f := range byFlag {
		flags = append(flags, f)
	}
	slices.Sort(flags)
	var b strings.Builder
	for _, f := range flags {
		keys := byFlag[f]
		slices.Sort(keys)
		fmt.Fprintf(&b, "  %-40s %s\n", strings.Join(keys, ", "), f)
	}
	return b.String()
}

func negateBool(s string) (string, error) {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return "", fmt.Errorf("want true or false")
	}
	return strconv.FormatBool(!v), nil
}

func offsetReset(s string) (string, error) {
	switch strings.ToLower(s) {
	case "earliest", "smallest", "beginning":
		return "earliest", nil
	case "latest", "largest", "end":
		return "latest", nil
	}
	return "", fmt.Errorf("want earliest or latest (smallest, largest)")
}

func acksValue(s string) (string, error) {
	switch strings.ToLower(s) {
	case "all", "-1":
		return "all", nil
	case "0", "1":
		return s, nil
	}
	return "", fmt.Errorf("want all (-1), 1 or 0")
}

func milliseconds(s string) (string, error) {
	ms, err := strconv.ParseFloat(s, 64)
	if err != nil || ms < 0 || ms > float64(time.Hour/time.Millisecond) {
		return "", fmt.Errorf("want milliseconds, from 0 to 3600000")
	}
	return time.Duration(ms * float64(time.Millisecond)).String(), nil
}

// applyProperties sets the flags of cmd that the -X properties name. A
// property whose flag is given too, or that cmd does not have, is a usage
// error: riffle would otherwise pick one of two settings, or ignore one.
func (a *app) applyProperties(cmd *cobra.Command) error {
	fs := cmd.Flags()
	for _, kv := range a.props {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return usageErrorf("-X %q: want KEY=VALUE", kv)
		}
		p, ok := properties[k]
		if !ok {
			keys := make([]string, 0, len(properties))
			for k := range properties {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return usageErrorf("-X %s: unknown property; riffle knows %s (see riffle --help)", k, strings.Join(keys, ", "))
		}
		if p.flag == "" {
			if a.securityProtocol != "" {
				return usageErrorf("-X %s given twice", k)
			}
			up := strings.ToUpper(strings.TrimSpace(v))
			if !slices.Contains(securityProtocols, up) {
				return usageErrorf("-X %s=%s: want one of %s", k, v, strings.Join(securityProtocols, ", "))
			}
			a.securityProtocol = up
			continue
		}
		f := fs.Lookup(p.flag)
		if f == nil {
			return usageErrorf("-X %s (--%s) does not apply to %s", k, p.flag, cmd.CommandPath())
		}
		if f.Changed {
			return usageErrorf("-X %s sets --%s, which is given already", k, p.flag)
		}
		val := v
		if p.value != nil {
			var err error
			if val, err = p.value(v); err != nil {
				return usageErrorf("-X %s=%s: %v", k, v, err)
			}
		}
		if err := fs.Set(p.flag, val); err != nil {
			return usageErrorf("-X %s=%s: %v", k, v, err)
		}
	}
	return a.checkSecurityProtocol()
}

// checkSecurityProtocol holds the other security flags to -X
// security.protocol, if given, and turns TLS on for SSL and SASL_SSL.
func (a *app) checkSecurityProtocol() error {
	p := a.securityProtocol
	if p == "" {
		return nil
	}
	wantTLS := p == "SSL" || p == "SASL_SSL"
	wantSASL := strings.HasPrefix(p, "SASL_")
	switch {
	case !wantTLS && a.tlsEnabled():
		return usageErrorf("-X security.protocol=%s is without TLS, but --tls or a --tls-* flag is given", p)
	case wantSASL && a.saslMech == "":
		return usageErrorf("-X security.protocol=%s needs a SASL mechanism: -X sasl.mechanism=... or --sasl-mechanism", p)
	case !wantSASL && a.saslMech != "":
		return usageErrorf("-X security.protocol=%s is without SASL, but a SASL mechanism is given (use SASL_PLAINTEXT or SASL_SSL)", p)
	}
	a.tlsOn = a.tlsOn || wantTLS
	return nil
}

// topicArg sets *topic from the TOPIC argument of consume or produce,
// unless -t (--topic) gave it: one of the two is needed.
func topicArg(cmd *cobra.Command, args []string, topic *string) error {
	byFlag := cmd.Flags().Changed("topic")
	switch {
	case len(args) == 1 && byFlag:
		return usageErrorf("the topic is given twice, as the argument %q and as -t %q: give one", args[0], *topic)
	case len(args) == 1:
		*topic = args[0]
	case !byFlag:
		return usageErrorf("%s needs a topic: riffle %s TOPIC, or -t TOPIC", cmd.Name(), cmd.Name())
	}
	return nil
}
