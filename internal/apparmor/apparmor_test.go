package apparmor

import (
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
)

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseOSRelease(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]string
	}{
		{"ID=ubuntu\nVERSION_ID=\"24.04\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n", map[string]string{"ID": "ubuntu", "VERSION_ID": "24.04", "PRETTY_NAME": "Ubuntu 24.04.1 LTS"}},
		{"# comment\n\nID='debian'\nVERSION_ID=\"12\"\n", map[string]string{"ID": "debian", "VERSION_ID": "12"}},
		{"NAME=\"a \\\"b\\\" \\$c\"\nnoequals\n", map[string]string{"NAME": `a "b" $c`}},
		{"ID=\"\n", map[string]string{"ID": `"`}},
	}
	for _, tt := range tests {
		if got := ParseOSRelease([]byte(tt.in)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseOSRelease(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseLoaded(t *testing.T) {
	got := parseLoaded([]byte("/usr/sbin/cupsd (enforce)\nbwrap (enforce)\nunpriv_bwrap (enforce)\nfirefox (unconfined)\nbroken\n\n"))
	want := map[string]string{"/usr/sbin/cupsd": "enforce", "bwrap": "enforce", "unpriv_bwrap": "enforce", "firefox": "unconfined"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseLoaded = %v, want %v", got, want)
	}
}

func TestAttachesBwrap(t *testing.T) {
	tests := []struct {
		name string
		text string
		want bool
	}{
		{"hand-written unconfined", string(testdata(t, "unconfined-bwrap")), true},
		{"ubuntu's own", string(testdata(t, "bwrap-userns-restrict")), true},
		{"path-named profile", "/usr/bin/bwrap flags=(complain) {\n}\n", true},
		{"other name, bwrap's path", "profile mybwrap /usr/bin/bwrap {\n}\n", true},
		{"a rule naming bwrap", "profile flatpak /usr/bin/flatpak {\n  /usr/bin/bwrap px,\n}\n", false},
		{"commented out", "# profile bwrap /usr/bin/bwrap {\n", false},
		{"bwrap elsewhere", "profile bwrap2 /opt/bwrap {\n}\n", false},
	}
	for _, tt := range tests {
		if got := attachesBwrap([]byte(tt.text)); got != tt.want {
			t.Errorf("%s: attachesBwrap = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCheckProfile(t *testing.T) {
	ubuntu := string(testdata(t, "bwrap-userns-restrict"))
	tests := []struct {
		name string
		text string
		want string // "" = accepted
	}{
		{"ubuntu's excerpt", ubuntu, ""},
		{"unconfined in a comment only", "# not flags=(unconfined)\n" + ubuntu, ""},
		{"hand-written unconfined", string(testdata(t, "unconfined-bwrap")), "unconfined"},
		{"unconfined added", strings.Replace(ubuntu, "(attach_disconnected)", "(attach_disconnected,unconfined)", 1), "unconfined"},
		{"children keep capabilities", strings.Replace(ubuntu, "audit deny capability,", "", 1), "audit deny capability"},
		{"no child profile", strings.Replace(ubuntu, "profile unpriv_bwrap", "profile other", 1), "unpriv_bwrap"},
		{"empty", "", "lacks"},
	}
	for _, tt := range tests {
		err := CheckProfile([]byte(tt.text))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: CheckProfile = %v, want an error naming %q", tt.name, err, tt.want)
		}
	}
}

// host is a Host of Ubuntu 24.04 with the restriction on, run as root,
// nothing installed or loaded yet.
func host(t *testing.T) Host {
	return Host{GOOS: "linux", Euid: 0,
		OSRelease: map[string]string{"ID": "ubuntu", "VERSION_ID": "24.04", "PRETTY_NAME": "Ubuntu 24.04.1 LTS"},
		Restrict:  1, Source: testdata(t, "bwrap-userns-restrict"), InstalledErr: fs.ErrNotExist,
		Loaded: map[string]string{"/usr/sbin/cupsd": "enforce"}, Parser: "/usr/sbin/apparmor_parser", Bwrap: true}
}

func TestDecide(t *testing.T) {
	ubuntu := testdata(t, "bwrap-userns-restrict")
	const (
		write = "write /r/etc/apparmor.d/bwrap-userns-restrict ("
		load  = "run /r/usr/sbin/apparmor_parser -r /r/etc/apparmor.d/bwrap-userns-restrict"
	)
	tests := []struct {
		name   string
		change func(*Host)
		dryRun bool
		steps  []string // prefixes of the steps' String, in order
		err    []string // substrings of the refusal; nil = none
		fact   string   // a substring of some fact, when set
	}{
		{"fresh ubuntu 24.04", func(h *Host) {}, false, []string{write, load}, nil, "does not exist"},
		{"ubuntu 25.10", func(h *Host) { h.OSRelease["VERSION_ID"] = "25.10" }, false, []string{write, load}, nil, ""},
		{"installed and loaded: nothing", func(h *Host) {
			h.Installed, h.InstalledErr = ubuntu, nil
			h.Loaded = map[string]string{"bwrap": "enforce", "unpriv_bwrap": "enforce"}
		}, false, nil, nil, "holds bwrap and unpriv_bwrap in enforce"},
		{"installed, not loaded", func(h *Host) { h.Installed, h.InstalledErr = ubuntu, nil }, false, []string{load}, nil, "neither is loaded"},
		{"installed, an unconfined bwrap loaded", func(h *Host) {
			h.Installed, h.InstalledErr = ubuntu, nil
			h.Loaded = map[string]string{"bwrap": "unconfined"}
		}, false, []string{load}, nil, "bwrap (unconfined)"},
		{"installed by the package, no source (25.04)", func(h *Host) {
			h.Installed, h.InstalledErr, h.Source, h.SourceErr = ubuntu, nil, nil, fs.ErrNotExist
			h.Loaded = map[string]string{"bwrap": "enforce", "unpriv_bwrap": "enforce"}
		}, false, nil, nil, "as Ubuntu's apparmor package installs it"},
		{"installed copy differs: kept", func(h *Host) {
			h.Installed, h.InstalledErr = append([]byte("# local note\n"), ubuntu...), nil
		}, false, []string{load}, nil, "kept as it is"},
		{"written this run: loaded anyway", func(h *Host) {
			h.Loaded = map[string]string{"bwrap": "enforce", "unpriv_bwrap": "enforce"}
		}, false, []string{write, load}, nil, ""},
		{"dry run as a user", func(h *Host) { h.Euid = 1000; h.LoadedErr = fs.ErrPermission; h.Loaded = nil }, true, []string{write, load}, nil, "does not exist"},
		{"dry run as a user, installed", func(h *Host) {
			h.Euid, h.LoadedErr, h.Loaded = 1000, fs.ErrPermission, nil
			h.Installed, h.InstalledErr = ubuntu, nil
		}, true, []string{load}, nil, "could not be read as uid 1000"},

		{"debian", func(h *Host) {
			h.OSRelease = map[string]string{"ID": "debian", "VERSION_ID": "12", "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)"}
		}, false, nil, []string{"refuses Debian GNU/Linux 12 (bookworm) (ID=debian)", "only installs Ubuntu's own", "fix: nothing to install"}, ""},
		{"debian dry run", func(h *Host) { h.OSRelease = map[string]string{"ID": "debian"} }, true, nil, []string{"ID=debian"}, ""},
		{"ubuntu derivative", func(h *Host) {
			h.OSRelease = map[string]string{"ID": "linuxmint", "ID_LIKE": "ubuntu debian", "VERSION_ID": "22", "NAME": "Linux Mint"}
		}, false, nil, []string{"Linux Mint (ID=linuxmint)", "derivatives"}, ""},
		{"ubuntu 22.04", func(h *Host) { h.OSRelease["VERSION_ID"] = "22.04" }, false, nil, []string{"refuses Ubuntu 22.04", "24.04"}, ""},
		{"ubuntu 23.10", func(h *Host) { h.OSRelease["VERSION_ID"] = "23.10" }, false, nil, []string{"Ubuntu 23.10"}, ""},
		{"ubuntu odd version", func(h *Host) { h.OSRelease["VERSION_ID"] = "devel" }, false, nil, []string{"Ubuntu devel"}, ""},
		{"no os-release", func(h *Host) { h.OSRelease, h.OSReleaseErr = nil, fs.ErrNotExist }, false, nil, []string{"cannot tell the distribution"}, ""},
		{"macOS", func(h *Host) { h.GOOS = "darwin" }, false, nil, []string{"Linux only", "darwin"}, ""},
		{"restriction off", func(h *Host) { h.Restrict = 0 }, false, nil, nil, "nothing to do: kernel.apparmor_restrict_unprivileged_userns = 0"},
		{"no restriction in the kernel", func(h *Host) { h.Restrict = -1 }, false, nil, nil, "nothing to do: the kernel has no"},
		{"not root", func(h *Host) { h.Euid = 1000 }, false, nil, []string{"needs root", "uid 1000", "sudo sandbox-run setup"}, ""},
		{"apparmor off", func(h *Host) { h.Loaded, h.LoadedErr = nil, fs.ErrNotExist }, false, nil, []string{"AppArmor is not enabled"}, ""},
		{"no apparmor_parser", func(h *Host) { h.Parser = "" }, false, nil, []string{"apparmor_parser not found", "apt-get install apparmor"}, ""},
		{"no bwrap", func(h *Host) { h.Bwrap = false }, false, nil, []string{"/usr/bin/bwrap not found", "apt-get install bubblewrap"}, ""},
		{"disabled", func(h *Host) { h.Disabled = true }, false, nil, []string{"disabled", "rm /etc/apparmor.d/disable/bwrap-userns-restrict"}, ""},
		{"hand-written profile beside", func(h *Host) { h.Conflicts = []string{"/etc/apparmor.d/bwrap"} }, false, nil, []string{"installed: /r/etc/apparmor.d/bwrap", "unconfined", "apparmor_parser -R /r/etc/apparmor.d/bwrap, then rm /r/etc/apparmor.d/bwrap"}, ""},
		{"installed is a link", func(h *Host) { h.InstalledLink = true; h.InstalledErr = nil }, false, nil, []string{"symbolic link"}, ""},
		{"installed is unconfined", func(h *Host) {
			h.Installed, h.InstalledErr = testdata(t, "unconfined-bwrap"), nil
		}, false, nil, []string{"/r/etc/apparmor.d/bwrap-userns-restrict is not Ubuntu's", "unconfined"}, ""},
		{"installed unreadable", func(h *Host) { h.InstalledErr = fs.ErrPermission }, false, nil, []string{"cannot read /r/etc/apparmor.d/bwrap-userns-restrict"}, ""},
		{"no source", func(h *Host) { h.Source, h.SourceErr = nil, fs.ErrNotExist }, false, nil, []string{"not installed", "apt-get install apparmor-profiles"}, ""},
		{"source unreadable", func(h *Host) { h.Source, h.SourceErr = nil, errors.New("too large") }, false, nil, []string{"too large", "--reinstall"}, ""},
		{"source tampered", func(h *Host) { h.Source = testdata(t, "unconfined-bwrap") }, false, nil, []string{"extra-profiles/bwrap-userns-restrict is not Ubuntu's", "unconfined"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host(t)
			tt.change(&h)
			p, err := Decide("/r", h, tt.dryRun)
			if tt.err != nil {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("Decide = %v, want a refusal", err)
				}
				msg := err.Error()
				if strings.Count(msg, "; fix: ") != 1 || strings.Contains(msg, "\n") {
					t.Errorf("not one line with one fix: %s", msg)
				}
				for _, w := range tt.err {
					if !strings.Contains(msg, w) {
						t.Errorf("refusal lacks %q: %s", w, msg)
					}
				}
				if len(p.Steps) > 0 {
					t.Errorf("a refusal with steps: %v", p.Steps)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decide refused: %v", err)
			}
			if len(p.Steps) != len(tt.steps) {
				t.Fatalf("steps %v, want %q", p.Steps, tt.steps)
			}
			for i, s := range p.Steps {
				if !strings.HasPrefix(s.String(), tt.steps[i]) {
					t.Errorf("step %d = %s, want %s...", i, s, tt.steps[i])
				}
				if s.Write != "" && string(s.Data) != string(h.Source) {
					t.Errorf("the write is not a copy of Ubuntu's file")
				}
			}
			if facts := strings.Join(p.Facts, "\n"); tt.fact != "" && !strings.Contains(facts, tt.fact) {
				t.Errorf("facts lack %q:\n%s", tt.fact, facts)
			}
		})
	}
}
