// Command lint holds every function of the module to the readability bar:
// at most 80 lines and a cyclomatic complexity of at most 20, test files,
// test helpers (e2e, internal/sandboxtest, internal/mcptest) and generated
// files excepted. `make lint` runs it beside staticcheck.
//
// Functions over the bar when the bar was set are listed, with their
// figures, in scripts/lint/over.txt: a ratchet. A listed function may
// shrink but not grow, a function not listed may not cross the bar, and a
// listed function that no longer crosses it must leave the list (so the
// list only ever gets shorter). -write rewrites the list from the tree,
// for the commit that shortens it; never to let a function grow.
//
// Complexity is counted as gocyclo counts it: 1, plus one for each if,
// for, range, non-default case and select case, && and ||.
//
// Usage:
//
//	lint [-write] [-list scripts/lint/over.txt] [ROOT]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const (
	maxLines      = 80
	maxComplexity = 20
)

// exempt are the directories whose functions are test helpers.
var exempt = []string{"e2e", "internal/sandboxtest", "internal/mcptest", ".cache", "bin"}

// figures are one function's measures.
type figures struct{ lines, complexity int }

func (f figures) over() bool { return f.lines > maxLines || f.complexity > maxComplexity }

func main() {
	write := flag.Bool("write", false, "rewrite the list of functions over the bar from the tree")
	list := flag.String("list", "scripts/lint/over.txt", "the list of functions over the bar")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	got, err := measure(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lint:", err)
		os.Exit(2)
	}
	if *write {
		if err := writeList(*list, got); err != nil {
			fmt.Fprintln(os.Stderr, "lint:", err)
			os.Exit(2)
		}
		return
	}
	allowed, err := readList(*list)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lint:", err)
		os.Exit(2)
	}
	problems := compare(got, allowed)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("lint: %d problem(s); the bar is %d lines and complexity %d per function\n", len(problems), maxLines, maxComplexity)
		os.Exit(1)
	}
}

// compare returns one line per function that crosses the bar without
// being listed, grew past its listed figures, or is listed but no longer
// crosses the bar.
func compare(got, allowed map[string]figures) []string {
	var out []string
	for name, f := range got {
		a, listed := allowed[name]
		switch {
		case f.over() && !listed:
			out = append(out, fmt.Sprintf("%s: %d lines, complexity %d: over the bar", name, f.lines, f.complexity))
		case listed && (f.lines > max(a.lines, maxLines) || f.complexity > max(a.complexity, maxComplexity)):
			out = append(out, fmt.Sprintf("%s: %d lines, complexity %d: grew (listed at %d, %d)", name, f.lines, f.complexity, a.lines, a.complexity))
		case listed && !f.over():
			out = append(out, fmt.Sprintf("%s: now within the bar: take it off the list (lint -write)", name))
		}
	}
	for name := range allowed {
		if _, ok := got[name]; !ok {
			out = append(out, fmt.Sprintf("%s: listed but gone: take it off the list (lint -write)", name))
		}
	}
	sort.Strings(out)
	return out
}

// measure returns the figures of every function over the bar or not,
// keyed "dir/file.go:Func" (methods as "Type.Method").
func measure(root string) (map[string]figures, error) {
	out := map[string]figures{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			for _, e := range exempt {
				if rel == e {
					return filepath.SkipDir
				}
			}
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			out[filepath.ToSlash(rel)+":"+funcName(fn)] = figures{lines, complexity(fn)}
		}
		return nil
	})
	return out, err
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

// complexity is fn's cyclomatic complexity as gocyclo counts it. Function
// literals inside count toward fn.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if x.List != nil {
				c++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// readList reads lines "NAME LINES COMPLEXITY"; # starts a comment.
func readList(path string) (map[string]figures, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]figures{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: want NAME LINES COMPLEXITY", path, n)
		}
		l, err1 := strconv.Atoi(fields[1])
		c, err2 := strconv.Atoi(fields[2])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s:%d: LINES and COMPLEXITY are numbers", path, n)
		}
		out[fields[0]] = figures{l, c}
	}
	return out, sc.Err()
}

func writeList(path string, got map[string]figures) error {
	var b strings.Builder
	b.WriteString("# Functions over the bar (80 lines, complexity 20) when it was set: each\n")
	b.WriteString("# may shrink, none may grow, and the list only gets shorter. See main.go.\n")
	var names []string
	for name, f := range got {
		if f.over() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%s %d %d\n", name, got[name].lines, got[name].complexity)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
