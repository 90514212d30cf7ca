package gitrepo

import "testing"

// TestStripGitConfig: only allow-listed settings survive, in canonical
// form; anything odd is dropped, never interpreted.
func TestStripGitConfig(t *testing.T) {
	cases := []struct {
		in, want string
		dropped  bool
	}{
		{"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n",
			"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", false},
		{"[core]\n\tbare = false\n\tfsmonitor = touch /tmp/x\n", "[core]\n\tbare = false\n", true},
		{"[core]\n\thooksPath = /tmp/h\n\tsshCommand = evil\n", "", true},
		{"[CORE] FsMonitor = x\n", "", true},
		{"[core] bare = false\n", "[core]\n\tbare = false\n", false},
		{"[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\tuploadpack = evil\n",
			"[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", true},
		{"[include]\n\tpath = /tmp/evil\n[includeIf \"gitdir:/\"]\n\tpath = x\n", "", true},
		{"[filter \"x\"]\n\tclean = evil\n[alias]\n\tst = !evil\n", "", true},
		{"[submodule \"s\"]\n\turl = ../s\n\tupdate = !evil\n", "[submodule \"s\"]\n\turl = ../s\n", true},
		{"[user]\n\tname = \"quoted\"\n\temail = a@b\n", "[user]\n\temail = a@b\n", true},
		// A continued line: the value and its continuation are dropped.
		{"[core]\n\tbare = false \\\n\tfsmonitor = evil\n", "", true},
		{"[core.sub]\n\tx = 1\n", "", true},
		{"[core\n\tfsmonitor = evil\n", "", true},
		{"# comment\n; comment\n[core]\n\tsymlinks = true # c\n", "", true},
	}
	for _, c := range cases {
		got, dropped := StripConfig(c.in)
		if got != c.want || dropped != c.dropped {
			t.Errorf("StripConfig(%q) = %q, %v; want %q, %v", c.in, got, dropped, c.want, c.dropped)
		}
	}
}
