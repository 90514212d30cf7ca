package procid

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestSelfAndJudge: this process names itself with its namespace's token
// (the inode /proc/self/ns/pid's link shows), and a judge here finds it
// alive; the same pid with another start time (reused), or an ended
// child, is Ended; a name of another namespace is Unknown whatever its pid
// and start; the zero Judge knows nothing; a legacy name is judged as
// made here.
func TestSelfAndJudge(t *testing.T) {
	me, boot, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if me.PID != os.Getpid() || boot == "" {
		t.Fatalf("Self = %+v, %q", me, boot)
	}
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	ino, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]"), 10, 64)
	if tok, _, _ := strings.Cut(me.NS, "t"); tok != strconv.FormatUint(ino, 16) {
		t.Errorf("token %s, want the pid namespace's inode %x (%s)", me.NS, ino, link)
	}

	c := exec.Command("true")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	child := ID{PID: c.Process.Pid, NS: me.NS}
	child.Start, err = Start(child.PID) // a zombie until Wait: still listed
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()

	reused, other, legacy := me, me, me
	reused.Start++
	other.NS = "1" // no namespace has inode 1
	legacy.NS = ""
	j := NewJudge()
	for _, tc := range []struct {
		name string
		id   ID
		want State
	}{
		{"self", me, Alive},
		{"reused pid", reused, Ended},
		{"ended child", child, Ended},
		{"another namespace", other, Unknown},
		{"legacy", legacy, Alive},
	} {
		if got := j.State(tc.id); got != tc.want {
			t.Errorf("%s: State(%v) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
		if got := (Judge{}).State(tc.id); got != Unknown {
			t.Errorf("%s: the zero Judge says %v, want Unknown", tc.name, got)
		}
	}
}
