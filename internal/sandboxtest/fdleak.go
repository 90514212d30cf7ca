package sandboxtest

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// RunLeakChecked runs the tests and returns the status for os.Exit: m.Run's
// when that is not 0, and 1 when they passed but left open a descriptor
// that was not open before them (each named on stderr as "N -> target").
// The check is skipped, leaving m.Run's status, where /proc/self/fd cannot
// be read (not Linux) and in a fuzzing run (-test.fuzz), whose engine holds
// descriptors of its own across the run. The runtime's poller is never
// counted as a leak: it is made by whichever test first needs it.
func RunLeakChecked(m *testing.M) int {
	before := openFDs()
	code := m.Run()
	if code != 0 || Fuzzing() {
		return code
	}
	if leaked := leakedFDs(before); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests leaked descriptors: %s\n", strings.Join(leaked, ", "))
		return 1
	}
	return 0
}

// Fuzzing reports whether this run fuzzes (-test.fuzz). Flags must have
// been parsed (m.Run does).
func Fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// leakedFDs returns the descriptors open now that are not in before (a
// snapshot by openFDs), as "N -> target" in the order of N. A number reused
// for another target counts as leaked. nil when before is nil.
func leakedFDs(before []string) []string {
	if before == nil {
		return nil
	}
	var leaked []string
	for _, fd := range openFDs() {
		if !slices.Contains(before, fd) {
			leaked = append(leaked, fd)
		}
	}
	return leaked
}

// openFDs lists this process's descriptors as "N -> target" in the order
// of N, leaving out the runtime's poller (its epoll and eventfd
// descriptors); nil where /proc/self/fd cannot be read.
func openFDs() []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	fds := make([]int, 0, len(ents))
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			fds = append(fds, n)
		}
	}
	slices.Sort(fds)
	list := []string{}
	for _, n := range fds {
		target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(n))
		if err != nil || target == "anon_inode:[eventpoll]" || target == "anon_inode:[eventfd]" {
			continue // gone (the directory's own descriptor), or the poller
		}
		list = append(list, strconv.Itoa(n)+" -> "+target)
	}
	return list
}
