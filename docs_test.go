package riffle

import (
	"go/ast"
	"go/build"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/riffle-go/riffle/internal/batch"
)

// publicPackages are the directories of the packages users import.
var publicPackages = []string{".", "process", "ranges", "rifftest", "plugin/awsmskiam", "plugin/otel", "plugin/prometheus", "plugin/beam"}

// parsePublic parses the non-test files of a public package (those built
// on this platform) and returns them with their documentation.
func parsePublic(t *testing.T, dir string) (*doc.Package, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, filepath.Base(name)); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/riffle-go/riffle/"+dir)
	if err != nil {
		t.Fatal(err)
	}
	return pkg, files
}

// TestGoDocShowsTheAPI checks what go doc makes of the public packages:
// an alias of an internal type shows neither fields nor methods; a
// constant declared as T(x) is not listed with T; and of a block of
// constants go doc T shows only the first.
func TestGoDocShowsTheAPI(t *testing.T) {
	for _, dir := range publicPackages {
		pkg, files := parsePublic(t, dir)
		for _, f := range files {
			for _, d := range f.Decls {
				if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
					for _, s := range gd.Specs {
						if ts := s.(*ast.TypeSpec); ts.Name.IsExported() && ts.Assign.IsValid() {
							t.Errorf("%s: type %s is an alias: go doc shows no fields or methods", dir, ts.Name)
						}
					}
				}
			}
		}
		for _, typ := range pkg.Types {
			for _, v := range typ.Consts {
				if len(v.Names) > 1 {
					t.Errorf("%s: go doc %s shows only %s of %v: declare each constant apart", dir, typ.Name, v.Names[0], v.Names)
				}
			}
		}
		for _, v := range pkg.Consts {
			for _, s := range v.Decl.Specs {
				vs := s.(*ast.ValueSpec)
				for _, val := range vs.Values {
					if _, ok := val.(*ast.CallExpr); ok && vs.Type == nil {
						t.Errorf("%s: const %s is a conversion: give it its type, or go doc lists it apart from the type", dir, vs.Names[0])
					}
				}
			}
		}
	}
}

// The Compression constants are plain numbers so that go doc shows them;
// they are the codec numbers of the batch attributes.
func TestCompressionIsTheBatchCodec(t *testing.T) {
	for c, codec := range map[Compression]batch.Codec{
		CompressionNone: batch.CodecNone, CompressionGzip: batch.CodecGzip, CompressionSnappy: batch.CodecSnappy,
		CompressionLZ4: batch.CodecLZ4, CompressionZstd: batch.CodecZstd,
	} {
		if batch.Codec(c) != codec || c.String() != codec.String() {
			t.Errorf("%v is codec %d, want %d (%v)", c, batch.Codec(c), codec, codec)
		}
	}
}

// TestDocCodeCompiles checks that every Go code block of the public
// packages' documentation and of README.md appears, line for line
// (indentation aside), in a test file of a public package: an Example, or
// doccode_test.go for code that needs a real cluster. The compiler then
// checks the code the docs show.
func TestDocCodeCompiles(t *testing.T) {
	var compiled [][]string // trimmed lines of every test file
	for _, dir := range publicPackages {
		names, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		for _, name := range names {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			compiled = append(compiled, trimLines(string(b)))
		}
	}
	type block struct{ where, code string }
	var blocks []block
	for _, dir := range publicPackages {
		pkg, _ := parsePublic(t, dir)
		texts := map[string]string{"package " + pkg.Name: pkg.Doc}
		for _, v := range append(pkg.Consts, pkg.Vars...) {
			texts[strings.Join(v.Names, ", ")] = v.Doc
		}
		for _, f := range pkg.Funcs {
			texts[f.Name] = f.Doc
		}
		for _, typ := range pkg.Types {
			texts[typ.Name] = typ.Doc
			for _, v := range append(typ.Consts, typ.Vars...) {
				texts[strings.Join(v.Names, ", ")] = v.Doc
			}
			for _, f := range append(typ.Funcs, typ.Methods...) {
				texts[typ.Name+"."+f.Name] = f.Doc
			}
		}
		for where, text := range texts {
			for _, b := range pkg.Parser().Parse(text).Content {
				if c, ok := b.(*comment.Code); ok {
					blocks = append(blocks, block{dir + ": " + where, c.Text})
				}
			}
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1) {
		blocks = append(blocks, block{"README.md", m[1]})
	}
	if len(blocks) < 3 {
		t.Fatalf("found only %d code blocks: is the search broken?", len(blocks))
	}
	for _, b := range blocks {
		want := trimLines(b.code)
		found := false
		for _, lines := range compiled {
			if containsRun(lines, want) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: this code block is in no test file, so nothing compiles it:\n%s", b.where, b.code)
		}
	}
}

func trimLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

// containsRun reports whether run appears in lines as consecutive lines.
func containsRun(lines, run []string) bool {
	for i := 0; i+len(run) <= len(lines); i++ {
		j := 0
		for j < len(run) && lines[i+j] == run[j] {
			j++
		}
		if j == len(run) {
			return true
		}
	}
	return false
}

// TestArchitecturePaths checks that the packages ARCHITECTURE.md names
// exist, so that it does not drift from the tree unnoticed.
func TestArchitecturePaths(t *testing.T) {
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile(`internal/[a-z]+`).FindAllString(string(b), -1)
	if len(paths) < 10 {
		t.Fatalf("found only %d package paths: is the search broken?", len(paths))
	}
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			t.Errorf("ARCHITECTURE.md names %s, which is not a package", p)
		}
	}
}
