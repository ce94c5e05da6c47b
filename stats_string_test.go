package riffle_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riffle-go/riffle"
)

// embedders are the exported structs of package riffle that embed
// TopicPartition, each with a value to print. Such a type would print only
// "topic[partition]" with %v and %+v (the String of TopicPartition is
// promoted), so each has its own, which must show every field.
// TestStringShowsEveryField finds them in the source: a new one must be
// added here.
var embedders = map[string]struct {
	v any // a pointer to a zero value, filled by the test
	// byValue: its String is a sentence ("t[0] committed 5 high
	// watermark 9 lag 4"), not Name:value; every field's value must
	// still show.
	byValue bool
}{
	"PartitionStats":        {v: &riffle.PartitionStats{}},
	"Assignment":            {v: &riffle.Assignment{}},
	"PartitionResult":       {v: &riffle.PartitionResult{}},
	"DeletedRecords":        {v: &riffle.DeletedRecords{}},
	"PartitionReassignment": {v: &riffle.PartitionReassignment{}},
	"LogDirPartition":       {v: &riffle.LogDirPartition{}},
	"ShareGroupOffset":      {v: &riffle.ShareGroupOffset{}},
	"PartitionProducers":    {v: &riffle.PartitionProducers{}},
	"PartitionLag":          {v: &riffle.PartitionLag{}, byValue: true},
	"TopicPartitionReplica": {v: &riffle.TopicPartitionReplica{}, byValue: true},
	"AbortTransactionSpec":  {v: &riffle.AbortTransactionSpec{}},
}

// Every field of every type embedding TopicPartition shows in %v, %+v
// and %s. The values are filled in by reflection, so a field added later
// and forgotten in String fails here.
func TestStringShowsEveryField(t *testing.T) {
	found := topicPartitionEmbedders(t)
	for _, name := range found {
		if _, ok := embedders[name]; !ok {
			t.Errorf("%s embeds TopicPartition but is not in embedders: add it (and give it a String showing every field)", name)
		}
	}
	for name, e := range embedders {
		if !slices.Contains(found, name) {
			t.Errorf("embedders lists %s, which does not embed TopicPartition (any more?)", name)
		}
		v := reflect.ValueOf(e.v).Elem()
		if got := v.Type().Name(); got != name {
			t.Fatalf("embedders[%q] is a %s", name, got)
		}
		fill(v)
		for _, verb := range []string{"%v", "%+v", "%s"} {
			checkFields(t, fmt.Sprintf(verb, v.Interface()), v, e.byValue)
		}
	}

	// ConsumerStats has no String of its own: its partitions print with
	// theirs.
	ps := *embedders["PartitionStats"].v.(*riffle.PartitionStats)
	st := riffle.ConsumerStats{BufferedBytes: 4242, Partitions: []riffle.PartitionStats{ps}}
	out := fmt.Sprintf("%+v", st)
	if !strings.Contains(out, "BufferedBytes:4242") {
		t.Errorf("%+v lacks BufferedBytes: %s", "ConsumerStats", out)
	}
	checkFields(t, out, reflect.ValueOf(ps), false)
}

// topicPartitionEmbedders returns the exported struct types of the
// package's non-test files that embed TopicPartition (or a pointer to it).
func topicPartitionEmbedders(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "riffle" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, fld := range st.Fields.List {
				typ := fld.Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok && len(fld.Names) == 0 && id.Name == "TopicPartition" {
					names = append(names, ts.Name.Name)
				}
			}
			return true
		})
	}
	if len(names) == 0 {
		t.Fatal("found no type embedding TopicPartition: is the test in the package's directory?")
	}
	return names
}

var (
	topicPartitionType = reflect.TypeFor[riffle.TopicPartition]()
	startOffsetType    = reflect.TypeFor[riffle.StartOffset]()
	durationType       = reflect.TypeFor[time.Duration]()
	timeType           = reflect.TypeFor[time.Time]()
	errorType          = reflect.TypeFor[error]()
)

// fill sets every field of the struct v to a distinct, recognizable,
// non-zero value.
func fill(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		fillValue(v.Field(i), int64(100+i))
	}
}

// fillValue sets v to a non-zero value derived from n: a slice or map
// gets one element, a pointer a value, a struct every field.
func fillValue(v reflect.Value, n int64) {
	switch t := v.Type(); {
	case t == topicPartitionType:
		v.Set(reflect.ValueOf(riffle.TopicPartition{Topic: "events", Partition: 7}))
	case t == startOffsetType:
		v.Set(reflect.ValueOf(riffle.AtOffset(4321)))
	case t == durationType:
		v.SetInt(n * int64(time.Second))
	case t == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(n) * time.Minute)))
	case t == errorType:
		v.Set(reflect.ValueOf(fmt.Errorf("boom%d", n)))
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.CanInt():
		v.SetInt(n)
	case v.CanUint():
		v.SetUint(uint64(n))
	case v.CanFloat():
		v.SetFloat(float64(n) + 0.5)
	case v.Kind() == reflect.String:
		v.SetString(fmt.Sprint("s", n))
	case v.Kind() == reflect.Slice:
		s := reflect.MakeSlice(t, 1, 1)
		fillValue(s.Index(0), n+1000)
		v.Set(s)
	case v.Kind() == reflect.Map:
		m := reflect.MakeMap(t)
		k, e := reflect.New(t.Key()).Elem(), reflect.New(t.Elem()).Elem()
		fillValue(k, n+2000)
		fillValue(e, n+3000)
		m.SetMapIndex(k, e)
		v.Set(m)
	case v.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		fillValue(p.Elem(), n)
		v.Set(p)
	case v.Kind() == reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fillValue(v.Field(i), n*10+int64(i))
		}
	default:
		panic("fill: no value for " + t.String())
	}
}

// checkFields checks that out shows the embedded partition and every other
// field of v as Name:value, or, byValue, the value alone.
func checkFields(t *testing.T, out string, v reflect.Value, byValue bool) {
	t.Helper()
	for i := 0; i < v.NumField(); i++ {
		sf := v.Type().Field(i)
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			f = f.Elem() // a String shows what it points to, not where
		}
		val := fmt.Sprintf("%v", f.Interface())
		if f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct {
			val = fmt.Sprintf("%+v", f.Interface()) // with the elements' field names
		}
		want := sf.Name + ":" + val
		if sf.Anonymous || byValue {
			want = val
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s: %q lacks %q", v.Type(), out, want)
		}
	}
}
