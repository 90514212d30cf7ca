package landlock

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestTranslatePerABI is the ABI table: for every kernel ABI, what is
// refused, what is handled, and which losses the report names. No kernel
// is needed.
func TestTranslatePerABI(t *testing.T) {
	in := func(abi int, ports []uint16) Input {
		return Input{ABI: abi, ReadDirs: []string{"/usr", "/etc"}, ReadFiles: []string{"/data/f"},
			WriteDirs: []string{"/w"}, WriteFiles: []string{"/dev/null"}, ConnectPorts: ports}
	}
	proxy := []uint16{41234}
	for _, tc := range []struct {
		abi      int
		ports    []uint16
		err      int // the ABI the refusal names; 0: no refusal
		config   string
		network  bool
		scoped   bool
		losses   []string // every loss name, in order
		noSignal bool     // the signals loss is absent
	}{
		{abi: 0, err: MinABI},
		{abi: 1, err: MinABI},
		{abi: 2, err: MinABI},
		{abi: 2, ports: proxy, err: MinABI},
		{abi: 3, config: "{Landlock V3; FS: all; Net: ∅; Scoped: ∅}",
			losses: []string{"processes", "proc", "lifetime", "signals", "network", "files", "protected_paths", "limits", "ipc"}},
		{abi: 3, ports: proxy, err: NetABI},
		{abi: 4, ports: proxy, config: "{Landlock V4; FS: all; Net: all; Scoped: ∅}", network: true,
			losses: []string{"processes", "proc", "lifetime", "signals", "network", "network", "network", "network", "files", "protected_paths", "limits", "ipc"}},
		{abi: 4, config: "{Landlock V4; FS: all; Net: all; Scoped: ∅}",
			losses: []string{"processes", "proc", "lifetime", "signals", "network", "files", "protected_paths", "limits", "ipc"}},
		{abi: 5, ports: proxy, config: "{Landlock V5; FS: all; Net: all; Scoped: ∅}", network: true,
			losses: []string{"processes", "proc", "lifetime", "signals", "network", "network", "network", "network", "files", "protected_paths", "limits", "ipc"}},
		{abi: 6, ports: proxy, config: "{Landlock V6; FS: all; Net: all; Scoped: all}", network: true, scoped: true, noSignal: true,
			losses: []string{"processes", "proc", "lifetime", "network", "network", "network", "network", "files", "protected_paths", "limits", "ipc"}},
		// V7 differs from V6 only in restrict_self flags, which String
		// does not show; the ABI field says 7.
		{abi: 7, ports: proxy, config: "{Landlock V6; FS: all; Net: all; Scoped: all}", network: true, scoped: true, noSignal: true,
			losses: []string{"processes", "proc", "lifetime", "network", "network", "network", "network", "files", "protected_paths", "limits", "ipc"}},
		{abi: 9, config: "{Landlock V6; FS: all; Net: all; Scoped: all}", scoped: true, noSignal: true,
			losses: []string{"processes", "proc", "lifetime", "network", "files", "protected_paths", "limits", "ipc"}},
	} {
		t.Run(fmt.Sprintf("abi%d_ports%d", tc.abi, len(tc.ports)), func(t *testing.T) {
			rs, err := Translate(in(tc.abi, tc.ports))
			if tc.err != 0 {
				var ae *ABIError
				if !errors.As(err, &ae) || !errors.Is(err, ErrABI) || ae.Need != tc.err || ae.Have != tc.abi {
					t.Fatalf("err = %v, want an ABIError needing %d", err, tc.err)
				}
				if !strings.Contains(err.Error(), KernelFor(tc.err)) {
					t.Errorf("%q does not name %s", err, KernelFor(tc.err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := min(tc.abi, MaxABI); rs.ABI != want {
				t.Errorf("ABI = %d, want %d", rs.ABI, want)
			}
			if got := rs.Config.String(); got != tc.config {
				t.Errorf("config = %s, want %s", got, tc.config)
			}
			if rs.Network != tc.network || rs.Scoped != tc.scoped {
				t.Errorf("network %v scoped %v, want %v %v", rs.Network, rs.Scoped, tc.network, tc.scoped)
			}
			var names []string
			for _, l := range rs.Losses {
				names = append(names, l.Name)
				if l.Detail == "" {
					t.Errorf("loss %s has no detail", l.Name)
				}
			}
			if !slices.Equal(names, tc.losses) {
				t.Errorf("losses = %v, want %v", names, tc.losses)
			}
			hasProxyLoss := slices.ContainsFunc(rs.Losses, func(l Loss) bool { return strings.Contains(l.Detail, "proxy's port at any address") })
			if hasProxyLoss != tc.network {
				t.Errorf("proxy-port loss named %v, want %v", hasProxyLoss, tc.network)
			}
		})
	}
}

// TestTranslateRules: the grants, exactly, for a policy shape: reads are
// read-only, the writable dirs get every right and refer, files get file
// rights only, and the only TCP port is the proxy's.
func TestTranslateRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want []string
	}{
		{"no network", Input{ABI: 6, ReadDirs: []string{"/usr"}, WriteDirs: []string{"/w"}}, []string{
			"REQUIRE {execute,read_file,read_dir} for paths [/usr]",
			"REQUIRE {execute,write_file,read_file,read_dir,remove_dir,remove_file,make_char,make_dir,make_reg,make_sock,make_fifo,make_block,make_sym,refer,truncate} for paths [/w]",
		}},
		{"every kind", Input{ABI: 6, ReadDirs: []string{"/usr", "/etc"}, ReadFiles: []string{"/r/f"},
			WriteDirs: []string{"/w", "/w2"}, WriteFiles: []string{"/dev/null"}, ConnectPorts: []uint16{1, 65535}}, []string{
			"REQUIRE {execute,read_file,read_dir} for paths [/usr /etc]",
			"REQUIRE {execute,read_file} for paths [/r/f]",
			"REQUIRE {execute,write_file,read_file,read_dir,remove_dir,remove_file,make_char,make_dir,make_reg,make_sock,make_fifo,make_block,make_sym,refer,truncate} for paths [/w /w2]",
			"REQUIRE {execute,write_file,read_file,truncate} for paths [/dev/null]",
			"ALLOW {connect_tcp} on port 1",
			"ALLOW {connect_tcp} on port 65535",
		}},
		{"nothing granted", Input{ABI: 3}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := Translate(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs.Rules {
				got = append(got, fmt.Sprint(r))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rules:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
