package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/riffle-go/riffle"
)

// recordTemplate is a kcat-style format string (consume --format with %
// verbs), parsed: literal text and verbs in order.
type recordTemplate []templatePart

// templatePart is literal text, or a verb when verb is not 0.
type templatePart struct {
	lit  string
	verb byte
}

// templateVerbs are the verbs a format string may use, as kcat's -f.
const templateVerbs = "tpokKsSTh"

// parseTemplate parses a format string: %t topic, %p partition, %o
// offset, %k key, %K key length, %s value, %S value length, %T timestamp
// (ms), %h headers, %% a percent sign; and the escapes \n, \t, \r, \\ (the
// shell passes them through single quotes as two characters). Other
// backslashes are kept as they are.
func parseTemplate(s string) (recordTemplate, error) {
	var t recordTemplate
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t = append(t, templatePart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			if i+1 == len(s) {
				return nil, fmt.Errorf("ends with a lone %%")
			}
			i++
			v := s[i]
			switch {
			case v == '%':
				lit.WriteByte('%')
			case strings.IndexByte(templateVerbs, v) >= 0:
				flush()
				t = append(t, templatePart{verb: v})
			default:
				return nil, fmt.Errorf("unknown verb %%%c: want %%t topic, %%p partition, %%o offset, %%k key, %%s value, %%K and %%S their lengths, %%T timestamp (ms), %%h headers or %%%%", v)
			}
		case c == '\\' && i+1 < len(s) && strings.IndexByte(`ntr\`, s[i+1]) >= 0:
			i++
			lit.WriteByte(map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', '\\': '\\'}[s[i]])
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

// write prints rec as the template says; the error is w's.
func (t recordTemplate) write(w *bufio.Writer, rec *riffle.Record) error {
	length := func(b []byte) string {
		if b == nil {
			return "-1"
		}
		return strconv.Itoa(len(b))
	}
	for _, p := range t {
		switch p.verb {
		case 0:
			w.WriteString(p.lit)
		case 't':
			w.WriteString(rec.Topic)
		case 'p':
			w.WriteString(strconv.Itoa(int(rec.Partition)))
		case 'o':
			w.WriteString(strconv.FormatInt(rec.Offset, 10))
		case 'k':
			w.Write(rec.Key)
		case 'K':
			w.WriteString(length(rec.Key))
		case 's':
			w.Write(rec.Value)
		case 'S':
			w.WriteString(length(rec.Value))
		case 'T':
			w.WriteString(strconv.FormatInt(rec.Timestamp.UnixMilli(), 10))
		case 'h':
			for i, h := range rec.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				w.WriteString(h.Key)
				w.WriteByte('=')
				w.Write(h.Value)
			}
		}
	}
	_, err := w.Write(nil) // the first error of the writes above, if any
	return err
}
