package apparmor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Runner runs one command of a Plan and returns its combined output.
// ExecRunner runs it for real; tests pass a fake apparmor_parser's path
// in the plan, or a Runner of their own.
type Runner func(ctx context.Context, argv []string) ([]byte, error)

// ExecRunner runs argv with a fixed, minimal environment: nothing of the
// caller's (under sudo, possibly a user's) reaches apparmor_parser.
func ExecRunner(ctx context.Context, argv []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	return cmd.CombinedOutput()
}

// loadTimeout bounds each command: apparmor_parser compiles this profile
// in well under a second.
const loadTimeout = 60 * time.Second

// Apply carries out p on the tree at root and returns one line per step
// done. The profile file is created, never replaced: if one appeared since
// Decide, Apply refuses. If a command fails after the file was written,
// the file is removed again, so the next boot does not load a profile
// that failed to load now. Once the steps are done, Apply reads the
// kernel's list back and fails unless bwrap and unpriv_bwrap are in
// enforce mode there.
func Apply(ctx context.Context, root string, p Plan, run Runner) (done []string, err error) {
	if len(p.Steps) == 0 {
		return nil, nil
	}
	var written []string
	defer func() {
		if err != nil {
			for _, w := range written {
				if rerr := os.Remove(w); rerr == nil {
					done = append(done, "removed "+w+" again")
				}
			}
		}
	}()
	for _, s := range p.Steps {
		if s.Write != "" {
			if err := create(s.Write, s.Data); err != nil {
				return done, err
			}
			written = append(written, s.Write)
			done = append(done, "wrote "+strings.TrimPrefix(s.String(), "write "))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, loadTimeout)
		out, rerr := run(cctx, s.Argv)
		cancel()
		if rerr != nil {
			return done, &Error{What: strings.Join(s.Argv, " ") + " failed", Why: rerr.Error() + outputText(out),
				Fix: "read apparmor_parser's message; sandbox-run setup --dry-run shows every step"}
		}
		done = append(done, "ran "+strings.Join(s.Argv, " "))
	}
	ok, rerr := ProfileLoaded(root)
	switch {
	case rerr != nil:
		return done, &Error{What: "cannot read back the loaded profiles", Why: errText(rerr), Fix: "run sandbox-run setup as root on the host"}
	case !ok:
		b, _ := os.ReadFile(filepath.Join(root, LoadedPath))
		return done, &Error{What: "apparmor_parser succeeded but the kernel does not hold bwrap and unpriv_bwrap in enforce mode",
			Why: "its list says" + loadedText(parseLoaded(b)), Fix: "aa-status shows what is loaded; sandbox-run setup again"}
	}
	done = append(done, "the kernel holds bwrap and unpriv_bwrap in enforce mode")
	return done, nil
}

// create writes data to path, a new file of mode 0644, whole or not at
// all: it is written under a temporary name and hard-linked into place,
// which fails rather than replaces a file that exists.
func create(path string, data []byte) error {
	dir := filepath.Dir(path)
	// A leading dot and a trailing ~ mark hidden and backup files, which
	// AppArmor's directory loads skip: a temporary file a crash leaves
	// behind is not meant to be loaded at boot. (Read from AppArmor's
	// sources, not tried on a real host.)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".sandbox-run-*~")
	if err != nil {
		return &Error{What: "cannot write " + path, Why: errText(err), Fix: "check that " + dir + " exists and is writable by root"}
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	if errors.Is(err, os.ErrExist) {
		return &Error{What: "cannot write " + path, Why: "it appeared while setup ran", Fix: "sandbox-run setup again"}
	}
	if err != nil {
		return &Error{What: "cannot write " + path, Why: errText(err), Fix: "check the file system holding " + dir}
	}
	return nil
}

// outputText is a command's output as a suffix of one line, bounded.
func outputText(out []byte) string {
	s := strings.Join(strings.Fields(string(out)), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	if s == "" {
		return ""
	}
	return fmt.Sprintf(" (it said %q)", s)
}
