//go:build ignore

// unused-exports lists, per package of every module under the directory it
// is given, the exported names that no Go file outside the package's
// directory refers to (its own _test.go files, internal or external, do not
// count). Every .go file is read whatever its build tags. A top-level name
// counts as used when some other directory's file that imports the package
// selects it (pkg.Name); a method (of a type or an interface) counts as used
// when any other directory's file selects a name equal to it, so the method
// list is only a list of leads. Usage:
//
//	go run scripts/unused-exports.go .
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type pkg struct {
	dir, path, name string
	top             map[string]string // name -> kind
	methods         map[string]string // name -> receiver
}

func main() {
	root, err := filepath.Abs(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// module paths
	mods := map[string]string{} // dir -> module path
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "testdata") {
			return filepath.SkipDir
		}
		if info.Name() == "go.mod" {
			b, _ := os.ReadFile(p)
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "module ") {
					mods[filepath.Dir(p)] = strings.TrimSpace(l[7:])
				}
			}
		}
		return nil
	})
	modOf := func(dir string) (string, string) {
		best := ""
		for d := range mods {
			if (dir == d || strings.HasPrefix(dir, d+"/")) && len(d) > len(best) {
				best = d
			}
		}
		return best, mods[best]
	}
	pkgs := map[string]*pkg{} // dir
	type file struct {
		dir string
		f   *ast.File
	}
	var files []file
	fset := token.NewFileSet()
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if info.IsDir() && (info.Name() == ".git" || info.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return nil
		}
		dir := filepath.Dir(p)
		files = append(files, file{dir, f})
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		pk := pkgs[dir]
		if pk == nil {
			md, mp := modOf(dir)
			rel, _ := filepath.Rel(md, dir)
			ip := mp
			if rel != "." {
				ip = mp + "/" + rel
			}
			pk = &pkg{dir: dir, path: ip, name: f.Name.Name, top: map[string]string{}, methods: map[string]string{}}
			pkgs[dir] = pk
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					pk.top[d.Name.Name] = "func"
				} else {
					t := d.Recv.List[0].Type
					if s, ok := t.(*ast.StarExpr); ok {
						t = s.X
					}
					if ix, ok := t.(*ast.IndexExpr); ok {
						t = ix.X
					}
					if id, ok := t.(*ast.Ident); ok {
						pk.methods[id.Name+"."+d.Name.Name] = id.Name
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							pk.top[s.Name.Name] = "type"
						}
						if st, ok := s.Type.(*ast.InterfaceType); ok && s.Name.IsExported() {
							for _, m := range st.Methods.List {
								for _, n := range m.Names {
									pk.methods[s.Name.Name+"."+n.Name] = s.Name.Name
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								pk.top[n.Name] = d.Tok.String()
							}
						}
					}
				}
			}
		}
		return nil
	})
	byPath := map[string]*pkg{}
	for _, p := range pkgs {
		byPath[p.path] = p
	}
	used := map[string]map[string]bool{}     // pkgpath -> name
	selByDir := map[string]map[string]bool{} // dir -> every selected name in it
	for _, fl := range files {
		alias := map[string]string{}
		for _, im := range fl.f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			p := byPath[ip]
			if p == nil {
				continue
			}
			n := p.name
			if im.Name != nil {
				n = im.Name.Name
			}
			alias[n] = ip
		}
		if selByDir[fl.dir] == nil {
			selByDir[fl.dir] = map[string]bool{}
		}
		ast.Inspect(fl.f, func(n ast.Node) bool {
			se, ok := n.(*ast.SelectorExpr)
			if ok {
				selByDir[fl.dir][se.Sel.Name] = true
				if id, ok := se.X.(*ast.Ident); ok {
					if ip, ok := alias[id.Name]; ok && byPath[ip].dir != fl.dir {
						if used[ip] == nil {
							used[ip] = map[string]bool{}
						}
						used[ip][se.Sel.Name] = true
					}
				}
			}
			return true
		})
	}
	var dirs []string
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		p := pkgs[d]
		var out []string
		for n, k := range p.top {
			if !used[p.path][n] {
				out = append(out, k+" "+n)
			}
		}
		var mout []string
		for m := range p.methods {
			name := m[strings.Index(m, ".")+1:]
			hit := false
			for od, s := range selByDir {
				if od != d && s[name] {
					hit = true
				}
			}
			if !hit {
				mout = append(mout, m)
			}
		}
		sort.Strings(out)
		sort.Strings(mout)
		if len(out)+len(mout) == 0 {
			continue
		}
		rel, _ := filepath.Rel(root, d)
		fmt.Printf("== %s (%s)\n", rel, p.name)
		for _, o := range out {
			fmt.Println("   ", o)
		}
		for _, o := range mout {
			fmt.Println("    method", o)
		}
	}
}
