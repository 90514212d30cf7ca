//go:build linux

package main

import "testing"

// straceTotal reads the calls column of strace -c's total line, with and
// without an errors column.
func TestStraceTotal(t *testing.T) {
	for _, tt := range []struct {
		summary string
		want    int
	}{
		{"% time     seconds  usecs/call     calls    errors syscall\n------ ----------- ----------- --------- --------- ----------------\n 40.22    0.002758          49        56         2 openat\n------ ----------- ----------- --------- --------- ----------------\n100.00    0.006858          50       137        22 total\n", 137},
		{"100.00    0.000119          17         7           total\n", 7},
	} {
		if got, err := straceTotal(tt.summary); err != nil || got != tt.want {
			t.Errorf("straceTotal = %d, %v; want %d", got, err, tt.want)
		}
	}
	if _, err := straceTotal("nothing"); err == nil {
		t.Error("a summary without a total line: no error")
	}
}
