package devenv

import (
	"io"
	"os"
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// maxConfig bounds a git config file read for the identity.
const maxConfig = 1 << 20

// globalConfigs lists the files git reads as the global config, in the
// order git reads them (a later one wins): GIT_CONFIG_GLOBAL alone when it
// is set, else the XDG file and then ~/.gitconfig.
func globalConfigs(lookup func(string) (string, bool)) []string {
	if g, ok := lookup("GIT_CONFIG_GLOBAL"); ok {
		if filepath.IsAbs(g) {
			return []string{filepath.Clean(g)}
		}
		return nil
	}
	home, _ := lookup("HOME")
	var out []string
	xdg, _ := lookup("XDG_CONFIG_HOME")
	switch {
	case filepath.IsAbs(xdg):
		out = append(out, filepath.Join(xdg, "git", "config"))
	case filepath.IsAbs(home):
		out = append(out, filepath.Join(home, ".config", "git", "config"))
	}
	if filepath.IsAbs(home) {
		out = append(out, filepath.Join(home, ".gitconfig"))
	}
	return out
}

// readIdentity reads the caller's identity from the global config files.
// A file that is missing, in or through a writable directory (g), not a
// regular file, or unreadable is skipped and named in skipped.
func readIdentity(g *pathguard.Guard, lookup func(string) (string, bool)) (id Identity, skipped []string) {
	for _, p := range globalConfigs(lookup) {
		text, err := readHostFile(g, p)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			skipped = append(skipped, p+": "+err.Error())
			continue
		}
		parseIdentity(text, &id)
	}
	return id, skipped
}

// readHostFile reads p after resolving it (a dotfile is often a link to a
// dotfiles repository): the real path must be outside every writable
// directory and is then opened without following any link, so a link
// swapped in after the check fails rather than leads elsewhere.
func readHostFile(g *pathguard.Guard, p string) (string, error) {
	r, err := g.Resolver().Resolve(p)
	if err != nil {
		return "", err
	}
	if !r.Exists {
		return "", os.ErrNotExist
	}
	// Checked at the caller's spelling: every path the walk visited,
	// links included, must be outside the writable set.
	if err := g.CheckHost(p); err != nil {
		return "", err
	}
	f, err := pathguard.OpenFile(r.Path, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfig))
	return string(b), err
}
