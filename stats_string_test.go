package riffle_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// Types that embed TopicPartition would print only "topic[partition]" with
// %v and %+v (its String is promoted); each has its own String, which must
// show every field. The values are filled in by reflection, so a field
// added later and forgotten in String fails here.
func TestStringShowsEveryField(t *testing.T) {
	var ps riffle.PartitionStats
	var as riffle.Assignment
	for _, c := range []any{&ps, &as} {
		v := reflect.ValueOf(c).Elem()
		fill(v)
		for _, verb := range []string{"%v", "%+v", "%s"} {
			checkFields(t, fmt.Sprintf(verb, v.Interface()), v)
		}
	}

	// ConsumerStats has no String of its own: its partitions print with
	// theirs.
	st := riffle.ConsumerStats{BufferedBytes: 4242, Partitions: []riffle.PartitionStats{ps}}
	out := fmt.Sprintf("%+v", st)
	if !strings.Contains(out, "BufferedBytes:4242") {
		t.Errorf("%+v lacks BufferedBytes: %s", "ConsumerStats", out)
	}
	checkFields(t, out, reflect.ValueOf(ps))
}

// fill sets every field of the struct v to a distinct, recognizable value.
func fill(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		n := int64(100 + i)
		switch {
		case f.Type() == reflect.TypeFor[riffle.TopicPartition]():
			f.Set(reflect.ValueOf(riffle.TopicPartition{Topic: "events", Partition: 7}))
		case f.Type() == reflect.TypeFor[riffle.StartOffset]():
			f.Set(reflect.ValueOf(riffle.AtOffset(4321)))
		case f.Type() == reflect.TypeFor[time.Duration]():
			f.SetInt(n * int64(time.Second))
		case f.Type() == reflect.TypeFor[error]():
			f.Set(reflect.ValueOf(errors.New("boom")))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.CanInt():
			f.SetInt(n)
		case f.Kind() == reflect.String:
			f.SetString(fmt.Sprint("s", n))
		default:
			panic("fill: no value for " + f.Type().String())
		}
	}
}

// checkFields checks that out shows the embedded partition and every other
// field of v as Name:value.
func checkFields(t *testing.T, out string, v reflect.Value) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		sf := v.Type().Field(i)
		want := fmt.Sprintf("%s:%v", sf.Name, v.Field(i).Interface())
		if sf.Anonymous {
			want = fmt.Sprint(v.Field(i).Interface())
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s: %q lacks %q", v.Type(), out, want)
		}
	}
}
