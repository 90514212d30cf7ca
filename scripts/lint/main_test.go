package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

func TestComplexity(t *testing.T) {
	for _, c := range []struct {
		src  string
		want int
	}{
		{"func f() {}", 1},
		{"func f(a, b bool) { if a && b || a {} }", 4},
		{"func f(x int) { switch x { case 1, 2: case 3: default: } }", 3},
		{"func f(c chan int) { for range c { select { case <-c: default: } } }", 3},
		{"func f() { g := func() { for {} }; g() }", 2},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package p\n"+c.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := complexity(f.Decls[0].(*ast.FuncDecl)); got != c.want {
			t.Errorf("%s: complexity %d, want %d", c.src, got, c.want)
		}
	}
}

func TestCompare(t *testing.T) {
	allowed := map[string]figures{"a.go:Big": {100, 5}, "a.go:Fixed": {90, 5}, "a.go:Gone": {90, 5}}
	got := map[string]figures{
		"a.go:Big":   {101, 5}, // grew
		"a.go:Fixed": {40, 5},  // within the bar now
		"a.go:New":   {10, 21}, // over, unlisted
		"a.go:Fine":  {80, 20}, // at the bar
	}
	want := []string{
		"a.go:Big: 101 lines, complexity 5: grew (listed at 100, 5)",
		"a.go:Fixed: now within the bar: take it off the list (lint -write)",
		"a.go:Gone: listed but gone: take it off the list (lint -write)",
		"a.go:New: 10 lines, complexity 21: over the bar",
	}
	out := compare(got, allowed)
	if len(out) != len(want) {
		t.Fatalf("got %q, want %q", out, want)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, out[i], want[i])
		}
	}
}
