package refusals

import (
	"bytes"
	"strings"
	"testing"
)

func TestCollectorOncePerTarget(t *testing.T) {
	var live bytes.Buffer
	c := New(&live)
	a := Refusal{Kind: KindConnect, Host: "example.com", Port: 22, Reason: "not-allowed", Fix: "--allow-host example.com:22"}
	if !c.Add(a) || c.Add(a) {
		t.Fatal("the first Add is new, the second is not")
	}
	c.Add(Refusal{Kind: KindConnect, Host: "example.com", Port: 443, Reason: "not-allowed", Fix: "--allow-host example.com"})
	got := c.List()
	if len(got) != 2 || got[0].Count != 2 || got[1].Count != 1 {
		t.Fatalf("List = %+v", got)
	}
	if n := strings.Count(live.String(), "\n"); n != 2 {
		t.Errorf("live lines %d, want one per distinct refusal:\n%s", n, live.String())
	}
	var sum bytes.Buffer
	Summary(&sum, got)
	want := "sandbox-run: refused connect example.com:22 (not-allowed); to allow it: --allow-host example.com:22 [2 times]\n"
	if !strings.HasPrefix(sum.String(), want) {
		t.Errorf("Summary = %q, want it to start %q", sum.String(), want)
	}
	var nilc *Collector
	if nilc.Add(a) || nilc.List() != nil {
		t.Error("a nil collector keeps nothing")
	}
}

func TestCollectorBounded(t *testing.T) {
	c := New(nil)
	for i := range MaxKept + 5 {
		c.Add(Refusal{Kind: KindConnect, Host: "h", Port: i + 1})
	}
	if len(c.List()) != MaxKept || c.Dropped() != 5 {
		t.Errorf("kept %d, dropped %d; want %d and 5", len(c.List()), c.Dropped(), MaxKept)
	}
}
