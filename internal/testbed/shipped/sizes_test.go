package shipped

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Shipped code's limits (the project's conventions): no function over maxFuncLines lines, no
// file over maxFileLines.
const (
	maxFuncLines = 80
	maxFileLines = 600
)

// notShipped are the directories, from the repository root, whose code does not ship: the fakes,
// the demo, and the test bed except chaos (the simulations, test helpers, emulator setup and
// end-to-end tests). Test files and testdata never count.
var notShipped = []string{
	"fake", "cmd/demo", "node_modules", "bin",
	"internal/testbed/browsertest", "internal/testbed/e2e", "internal/testbed/fakeparity",
	"internal/testbed/leasesim", "internal/testbed/local", "internal/testbed/shipped",
	"internal/testbed/sim", "internal/testbed/testenv", "internal/testbed/testkit",
	"internal/testbed/verify",
}

// TestShippedSizes lists every shipped function over maxFuncLines lines and every shipped file
// over maxFileLines, and fails on any not in known; an entry of known that no longer offends is
// reported, to be removed.
func TestShippedSizes(t *testing.T) {
	root := repoRoot(t)
	offenders, err := oversized(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offenders {
		t.Log(o)
		if !slices.Contains(known, key(o)) {
			t.Errorf("over the limit: %s", o)
		}
	}
	for _, k := range known {
		if !slices.ContainsFunc(offenders, func(o string) bool { return key(o) == k }) {
			t.Logf("%s is within the limits now (or gone): remove it from known", k)
		}
	}
}

// known are the offenders being rewritten elsewhere, by file and function ("file" alone for a
// file over the limit).
var known = []string{}

// key is an offender's entry without its size: "path" or "path func".
func key(offender string) string {
	f := strings.Fields(offender) // path [func] N lines
	if len(f) == 3 {
		return f[0]
	}
	return f[0] + " " + f[1]
}

// oversized reads root's shipped Go files: "path N lines" for a file over the limit, "path Func N
// lines" for a function.
func oversized(root string) ([]string, error) {
	files, err := shippedFiles(root)
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, rel := range files {
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			out = append(out, fmt.Sprintf("%s %d lines", rel, n))
		}
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				out = append(out, fmt.Sprintf("%s %s %d lines", rel, funcName(fn), n))
			}
		}
	}
	return out, nil
}

// shippedFiles are root's shipped Go files (not tests), slash-separated from root.
func shippedFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if slices.Contains(notShipped, rel) || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") {
			out = append(out, rel)
		}
		return nil
	})
	return out, err
}

// funcName is Name or Recv.Name.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// repoRoot is the directory of the esm module's go.mod, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/kinesis-esm/esm\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no esm go.mod above the test's directory")
		}
		dir = parent
	}
}
