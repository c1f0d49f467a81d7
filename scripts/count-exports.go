//go:build ignore

// count-exports prints, for each package directory given on the command line
// (relative to the current directory), how many exported top-level names its
// non-test Go files declare, and the totals. Run it through
// scripts/count-exports.sh.
//
// How it counts: every exported name declared at package level in a file
// that the default build context (this machine's GOOS/GOARCH, no extra tags)
// would compile, _test.go files excluded: each type, each function without a
// receiver, and each name of a const or var spec (so a const block of four
// names counts four). Exported methods of exported types are counted apart,
// in the "methods" column, and are not part of "names". Struct fields and
// interface methods are not counted.
package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type count struct {
	types, funcs, consts, vars, methods int
}

func (c count) names() int { return c.types + c.funcs + c.consts + c.vars }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go run count-exports.go DIR...")
		os.Exit(2)
	}
	var total count
	fmt.Printf("%-28s %5s %5s %6s %5s %5s %7s\n", "package", "names", "types", "funcs", "const", "vars", "methods")
	for _, dir := range os.Args[1:] {
		c, err := countDir(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%-28s %5d %5d %6d %5d %5d %7d\n", dir, c.names(), c.types, c.funcs, c.consts, c.vars, c.methods)
		total.types += c.types
		total.funcs += c.funcs
		total.consts += c.consts
		total.vars += c.vars
		total.methods += c.methods
	}
	fmt.Printf("%-28s %5d %5d %6d %5d %5d %7d\n", "total", total.names(), total.types, total.funcs, total.consts, total.vars, total.methods)
}

func countDir(dir string) (count, error) {
	var c count
	entries, err := os.ReadDir(dir)
	if err != nil {
		return c, err
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		ok, err := build.Default.MatchFile(dir, name)
		if err != nil {
			return c, err
		}
		if ok {
			files = append(files, filepath.Join(dir, name))
		}
	}
	sort.Strings(files)
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return c, err
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					c.funcs++
				} else if receiverExported(d.Recv) {
					c.methods++
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							c.types++
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							if d.Tok == token.CONST {
								c.consts++
							} else {
								c.vars++
							}
						}
					}
				}
			}
		}
	}
	return c, nil
}

// receiverExported reports whether a method's receiver type is exported.
func receiverExported(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}
