package bwrap

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/mount"
)

// decodeArgs reads an --args stream the way bwrap does (bubblewrap.c,
// parse_args_recurse): the data is a run of strings, each ending at the
// next NUL; bytes after the last NUL, if any, are one more string (bwrap
// adds a terminating NUL when it loads the data). An empty stream holds no
// arguments.
func decodeArgs(b []byte) []string {
	var args []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			args = append(args, string(b))
			break
		}
		args = append(args, string(b[:i]))
		b = b[i+1:]
	}
	return args
}

// splitArgs makes an argument list from fuzz input: empty input is no
// arguments, anything else is split on sep (so arguments may be empty, and
// hold NUL bytes unless sep is NUL).
func splitArgs(s string, sep byte) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, string([]byte{sep}))
}

// FuzzEncode checks that Encode refuses exactly the argument lists that
// hold a NUL byte, with ErrNUL and the index of the first such argument,
// and that bwrap reads every other list back exactly: same count, same
// bytes, empty arguments included.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "--bind\n/a\n/b", "\n", "\n\n", "a\x00b", "--setenv\nK\nv\x00--bind\n/\n/", "\xff\xfe\n ", "\x00"} {
		f.Add(s, byte('\n'))
	}
	f.Add("a\x00b\x00", byte(0))
	f.Fuzz(func(t *testing.T, s string, sep byte) {
		args := splitArgs(s, sep)
		b, err := Encode(args)
		first := slices.IndexFunc(args, func(a string) bool { return strings.IndexByte(a, 0) >= 0 })
		if first >= 0 {
			if !errors.Is(err, ErrNUL) || b != nil {
				t.Fatalf("Encode(%q) = %q, %v; want nil and an error wrapping ErrNUL", args, b, err)
			}
			if want := fmt.Sprintf("argument %d:", first); !strings.Contains(err.Error(), want) {
				t.Fatalf("Encode(%q) error %q does not name %s", args, err, want)
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode(%q): %v", args, err)
		}
		if got := decodeArgs(b); !slices.Equal(got, args) {
			t.Fatalf("Encode(%q) = %q, which bwrap reads as %q", args, b, got)
		}
		if n := bytes.Count(b, []byte{0}); n != len(args) || (len(b) > 0 && b[len(b)-1] != 0) {
			t.Fatalf("Encode(%q) = %q: %d terminators for %d arguments", args, b, n, len(args))
		}
	})
}

// FuzzArgs checks Args with hostile strings in every free-text field: it
// refuses a NUL byte anywhere with ErrNUL; otherwise the stream it builds
// encodes, reads back exactly, and still opens with the fixed isolation
// options, whatever the strings say (a value that looks like an option stays
// a value).
func FuzzArgs(f *testing.F) {
	f.Add("sandbox", "/src", "/dst", "/w", "K=v")
	f.Add("--bind", "/ --bind / /", "--unshare-all", "--chdir", "--setenv=x=y")
	f.Add("h\x00", "/a\x00b", "/\x00", "/w\x00", "K=\x00")
	f.Add("", "", "", "", "=v")
	f.Fuzz(func(t *testing.T, hostname, src, dst, chdir, env string) {
		s := Spec{
			UID: -1, GID: -1, SeccompFD: -1, InfoFD: -1, Hostname: hostname, Chdir: chdir, Env: []string{env},
			Mounts: []mount.Step{
				{Kind: mount.ROBind, Src: src, Dst: dst, FD: -1},
				{Kind: mount.Bind, Src: src, Dst: dst, FD: 7},
				{Kind: mount.Symlink, Src: src, Dst: dst, FD: -1},
				{Kind: mount.Tmpfs, Dst: dst, Size: 1 << 20, FD: -1},
				{Kind: mount.Dir, Dst: dst, FD: -1},
			},
		}
		args, err := Args(s)
		key, val, envOK := strings.Cut(env, "=")
		envOK = envOK && key != ""
		switch {
		case strings.ContainsRune(hostname+src+dst+chdir+env, 0):
			if err == nil || !errors.Is(err, ErrNUL) && envOK {
				t.Fatalf("Args with a NUL byte = %q, %v; want an error wrapping ErrNUL", args, err)
			}
			return
		case !envOK:
			if err == nil {
				t.Fatalf("Args accepted the env entry %q", env)
			}
			return
		case err != nil:
			t.Fatalf("Args: %v", err)
		}
		b, err := Encode(args)
		if err != nil {
			t.Fatalf("Encode(Args): %v", err)
		}
		if got := decodeArgs(b); !slices.Equal(got, args) {
			t.Fatalf("Args stream %q reads back as %q", args, got)
		}
		fixed := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
			"--cap-drop", "ALL", "--new-session", "--die-with-parent"}
		if !slices.Equal(args[:len(fixed)], fixed) {
			t.Fatalf("Args does not open with the fixed isolation options: %q", args)
		}
		opts, err := parseOptions(args)
		if err != nil {
			t.Fatalf("Args stream %q: %v", args, err)
		}
		want := [][]string{{"--unshare-user"}, {"--unshare-pid"}, {"--unshare-ipc"}, {"--unshare-uts"}, {"--unshare-net"},
			{"--cap-drop", "ALL"}, {"--new-session"}, {"--die-with-parent"}}
		if hostname != "" {
			want = append(want, []string{"--hostname", hostname})
		}
		want = append(want, []string{"--ro-bind", src, dst}, []string{"--bind-fd", "7", dst}, []string{"--symlink", src, dst},
			[]string{"--tmpfs", dst}, []string{"--dir", dst}, []string{"--setenv", key, val})
		if chdir != "" {
			want = append(want, []string{"--chdir", chdir})
		}
		if !slices.EqualFunc(opts, want, slices.Equal) {
			t.Fatalf("Args stream %q reads as options %q, want %q", args, opts, want)
		}
	})
}

// optionArity is the number of values each option Args emits takes, as
// bwrap's parser consumes them.
var optionArity = map[string]int{
	"--unshare-user": 0, "--unshare-pid": 0, "--unshare-ipc": 0, "--unshare-uts": 0, "--unshare-net": 0,
	"--unshare-cgroup-try": 0, "--disable-userns": 0, "--new-session": 0, "--die-with-parent": 0, "--as-pid-1": 0,
	"--clearenv": 0, "--cap-drop": 1, "--uid": 1, "--gid": 1, "--hostname": 1, "--proc": 1, "--dev": 1,
	"--size": 1, "--tmpfs": 1, "--remount-ro": 1, "--dir": 1, "--seccomp": 1, "--info-fd": 1, "--chdir": 1,
	"--ro-bind": 2, "--bind": 2, "--ro-bind-fd": 2, "--bind-fd": 2, "--symlink": 2, "--setenv": 2,
}

// parseOptions groups a stream into options and their values the way
// bwrap walks it: an option name, then as many values as it takes, whatever
// they look like.
func parseOptions(args []string) ([][]string, error) {
	var opts [][]string
	for len(args) > 0 {
		n, ok := optionArity[args[0]]
		if !ok {
			return nil, fmt.Errorf("%q where an option was expected", args[0])
		}
		if len(args) < n+1 {
			return nil, fmt.Errorf("%s lacks its values", args[0])
		}
		opts = append(opts, args[:n+1])
		args = args[n+1:]
	}
	return opts, nil
}
