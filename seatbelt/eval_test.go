package seatbelt

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// This file is a test oracle: a small evaluator of rendered profiles with
// Seatbelt's documented matching (the last rule that matches decides;
// "op*" covers every operation with that prefix; filters at the top of a
// rule are alternatives). It is not Seatbelt, and agreeing with it proves
// only that the text says what this package means it to say; but it makes
// each hole a desk review found a test that fails when the text reopens
// it, whatever the exact wording of the rules.

// access is one operation the evaluator decides.
type access struct {
	op     string // file-write-create, file-read-data, network-outbound, mach-lookup, ...
	path   string // for file operations
	vnode  string // REGULAR-FILE, DIRECTORY, SYMLINK: the kind of file the operation is on
	remote string // for network-outbound: "tcp localhost:PORT" or "udp localhost:PORT"
	name   string // for mach-lookup: the global name
}

func (a access) String() string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %s %s %s", a.op, a.path, a.vnode, a.remote, a.name))
}

// decide returns whether prof allows a, and the rule that decided.
func decide(t *testing.T, prof Profile, a access) (bool, string) {
	t.Helper()
	rules, err := readSBPL(prof.String())
	if err != nil {
		t.Fatal(err)
	}
	allowed, by := false, "(no rule)"
	for _, r := range rules {
		if !r.isList || len(r.list) == 0 || (r.list[0].sym != "allow" && r.list[0].sym != "deny") {
			continue
		}
		ops, filters := splitRule(r)
		if !opMatches(ops, a.op) {
			continue
		}
		match := len(filters) == 0
		for _, f := range filters {
			ok, err := filterMatches(f, a)
			if err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			match = match || ok
		}
		if match {
			allowed, by = r.list[0].sym == "allow", r.String()
		}
	}
	return allowed, by
}

func splitRule(r rnode) (ops []string, filters []rnode) {
	for _, c := range r.list[1:] {
		switch {
		case !c.isList:
			ops = append(ops, c.sym)
		case len(c.list) > 0 && c.list[0].sym == "with":
		default:
			filters = append(filters, c)
		}
	}
	return ops, filters
}

func opMatches(ops []string, op string) bool {
	for _, o := range ops {
		if o == "default" || o == op || (strings.HasSuffix(o, "*") && strings.HasPrefix(op, strings.TrimSuffix(o, "*"))) {
			return true
		}
	}
	return false
}

func filterMatches(f rnode, a access) (bool, error) {
	head := f.list[0].sym
	arg := func(i int) string {
		if i < len(f.list) && f.list[i].str != nil {
			return *f.list[i].str
		}
		return ""
	}
	switch head {
	case "literal":
		return a.path != "" && a.path == arg(1), nil
	case "subpath":
		s := arg(1)
		return a.path != "" && (a.path == s || strings.HasPrefix(a.path, strings.TrimSuffix(s, "/")+"/")), nil
	case "regex":
		re, err := regexp.Compile(arg(1))
		if err != nil {
			return false, err
		}
		return a.path != "" && re.MatchString(a.path), nil
	case "vnode-type":
		return a.vnode == f.list[1].sym, nil
	case "remote":
		proto, addr := f.list[1].sym, arg(2)
		return a.remote == proto+" "+addr || (proto == "ip" && strings.HasSuffix(a.remote, " "+addr)), nil
	case "global-name":
		return a.name == arg(1), nil
	case "require-all", "require-any", "require-not":
		all, any := true, false
		for _, c := range f.list[1:] {
			ok, err := filterMatches(c, a)
			if err != nil {
				return false, err
			}
			all, any = all && ok, any || ok
		}
		switch head {
		case "require-all":
			return all, nil
		case "require-any":
			return any, nil
		}
		return !any, nil
	case "target", "sysctl-name", "sysctl-name-prefix", "socket-domain", "ipc-posix-name":
		// Not about files, addresses or Mach names: never matches the
		// accesses these tests ask about.
		return false, nil
	}
	return false, fmt.Errorf("the evaluator does not know the filter %q", head)
}
