package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// hostFile is one file sandbox-run itself opens on the host, named by the
// flag that gave it.
type hostFile struct {
	flag, path string // path absolute and clean; "" when the flag was not given
}

// checkHostFiles refuses, before anything runs, each file sandbox-run will
// open on the host that lies in or resolves through a writable directory
// of p (at either spelling): the command could replace it, or a directory
// on its way, with a link for sandbox-run to follow, now or in a later
// session. The files themselves are opened without following links
// (pathguard.OpenFile, pathguard.WriteFile).
func checkHostFiles(p policy.Policy, files ...hostFile) error {
	var g *pathguard.Guard
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if g == nil {
			var err error
			if g, err = pathguard.New(p.Writable()); err != nil {
				return fmt.Errorf("--%s %s: cannot check it against the writable dirs: %v; fix: name every --workdir and --write dir by its real path, and create it", f.flag, f.path, err)
			}
		}
		err := g.CheckHost(f.path)
		var ee *pathguard.EscapeError
		if errors.As(err, &ee) {
			how := "lies in writable dir " + ee.Writable
			if ee.Link != "" {
				how = fmt.Sprintf("reaches writable dir %s (via symlink %s -> %s)", ee.Writable, ee.Link, ee.Target)
			}
			return fmt.Errorf("--%s %s: %s, where the sandboxed command could swap it for a link; fix: name a file outside every --workdir and --write dir",
				f.flag, f.path, how)
		}
		if err != nil {
			return fmt.Errorf("--%s %s: %v; fix: name a file by its real path", f.flag, f.path, err)
		}
	}
	return nil
}

// hostPath makes the path of --flag absolute and clean ("" stays "").
func hostPath(flag, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return absPath(flag, p)
}

// readProfile parses the profile at path (absolute), opened without
// following a link.
func readProfile(flag, path string) (policy.Policy, error) {
	fh, err := pathguard.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return policy.Policy{}, fmt.Errorf("--%s %s: %v; fix: pass a readable profile file by its real path", flag, path, err)
	}
	defer fh.Close()
	p, err := policy.Parse(fh)
	if err != nil {
		return p, fmt.Errorf("--%s %s: %w; fix: correct the profile", flag, path, err)
	}
	return p, nil
}

// checkOutput refuses, before anything runs, an output file that could not
// be written afterwards (a run whose report is lost is a run the harness
// cannot account for): one whose directory is missing, one that exists
// and is not a regular file, and one whose path follows a symbolic link,
// which pathguard.WriteFile would refuse after the run.
func checkOutput(flag, path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--%s %s: directory %s does not exist; fix: create it or name a file in an existing directory", flag, path, dir)
	}
	r, err := pathguard.Resolve(path)
	if err != nil {
		return fmt.Errorf("--%s %s: %v; fix: name a file by its real path", flag, path, err)
	}
	if r.Path != path {
		return fmt.Errorf("--%s %s: follows a symbolic link to %s, which sandbox-run does not follow; fix: name the file by its real path, outside every --workdir and --write dir", flag, path, r.Path)
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("--%s %s: exists and is not a regular file; fix: name a file", flag, path)
	}
	return nil
}

// hostFiles makes --config, --report and --audit absolute (in f, for the
// opens that follow) and refuses them as checkHostFiles and checkOutput
// say, before anything runs.
func (f *runFlags) hostFiles(p policy.Policy) error {
	var err error
	for _, hf := range []struct {
		flag string
		path *string
	}{{"config", &f.config}, {"report", &f.report}, {"audit", &f.audit}} {
		if *hf.path, err = hostPath(hf.flag, *hf.path); err != nil {
			return err
		}
	}
	if err := checkHostFiles(p, hostFile{"config", f.config}, hostFile{"report", f.report}, hostFile{"audit", f.audit}); err != nil {
		return err
	}
	if f.report != "" {
		return checkOutput("report", f.report)
	}
	return nil
}
