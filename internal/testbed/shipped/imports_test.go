package shipped

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestProductImportsNoTestBed: no shipped package outside the test bed imports the test bed
// (internal/testbed/...) or the fakes (module fake): what only tests or simulates esm stays out
// of the binaries and of a user's build.
func TestProductImportsNoTestBed(t *testing.T) {
	root := repoRoot(t)
	files, err := shippedFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, rel := range files {
		if strings.HasPrefix(rel, "internal/testbed/") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/kinesis-esm/esm/internal/testbed/") ||
				path == "github.com/kinesis-esm/esm/fake" || strings.HasPrefix(path, "github.com/kinesis-esm/esm/fake/") {
				t.Errorf("%s imports %s", rel, path)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d shipped files read: the walk missed the tree", checked)
	}
}
