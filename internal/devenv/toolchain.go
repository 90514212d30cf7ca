package devenv

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/pathguard"
)

// Toolchain is one toolchain directory carried in: Bin goes on PATH, Show
// are the host directories shown read-only for it (Bin's installation:
// rustup's toolchains for cargo's proxies, a node version's lib for npm);
// none when Bin lies in a system path the sandbox shows anyway.
type Toolchain struct {
	Name string   `json:"name"`
	Bin  string   `json:"bin"`
	Show []string `json:"show,omitempty"`
}

// env is the caller's environment, looked up.
type env func(string) (string, bool)

// dirOf returns the absolute, clean value of the variable k, or def
// joined under home when k is unset; "" when neither is usable.
func (e env) dirOf(k, home, def string) string {
	if v, ok := e(k); ok && filepath.IsAbs(v) {
		return filepath.Clean(v)
	}
	if !filepath.IsAbs(home) || def == "" {
		return ""
	}
	return filepath.Join(home, def)
}

// candidates lists the toolchains a caller may have, by where each tool
// installs itself; which exist is for find to decide. It reads the
// environment and, for nvm and fnm, the caller's PATH and the manager's
// default alias.
func candidates(rv *pathguard.Resolver, e env) []Toolchain {
	home, _ := e("HOME")
	var out []Toolchain
	goroot := e.dirOf("GOROOT", "", "")
	if goroot == "" {
		goroot = "/usr/local/go"
	}
	out = append(out, Toolchain{Name: "go", Bin: filepath.Join(goroot, "bin"), Show: []string{goroot}})
	if cargo := e.dirOf("CARGO_HOME", home, ".cargo"); cargo != "" {
		// Only bin: CARGO_HOME also holds credentials.toml.
		show := []string{filepath.Join(cargo, "bin")}
		if r := e.dirOf("RUSTUP_HOME", home, ".rustup"); r != "" {
			show = append(show, r)
		}
		out = append(out, Toolchain{Name: "cargo", Bin: filepath.Join(cargo, "bin"), Show: show})
	}
	if v := e.dirOf("VOLTA_HOME", home, ".volta"); v != "" {
		out = append(out, Toolchain{Name: "volta", Bin: filepath.Join(v, "bin"), Show: []string{v}})
	}
	if p := e.dirOf("PYENV_ROOT", home, ".pyenv"); p != "" {
		out = append(out, Toolchain{Name: "pyenv", Bin: filepath.Join(p, "shims"), Show: []string{p}})
	}
	if n := nodeVersion(rv, e, e.dirOf("NVM_DIR", home, ".nvm"), "versions/node", "alias/default"); n != "" {
		out = append(out, Toolchain{Name: "nvm", Bin: filepath.Join(n, "bin"), Show: []string{n}})
	}
	if n := nodeVersion(rv, e, e.dirOf("FNM_DIR", home, ".local/share/fnm"), "node-versions", "aliases/default"); n != "" {
		out = append(out, Toolchain{Name: "fnm", Bin: filepath.Join(n, "bin"), Show: []string{n}})
	}
	return out
}

// nodeVersion returns the installation directory (its bin's parent) of
// the node version a manager rooted at root selects: the first directory
// on the caller's PATH that resolves under root/versions, else what the
// manager's default alias names. "" when there is none.
func nodeVersion(rv *pathguard.Resolver, e env, root, versions, alias string) string {
	if root == "" {
		return ""
	}
	vroot := filepath.Join(root, versions) + "/"
	// One stat when the manager is absent (the common case) instead of
	// resolving every directory on PATH.
	if fi, err := rv.Stat(strings.TrimSuffix(vroot, "/")); err != nil || !fi.IsDir() {
		return ""
	}
	path, _ := e("PATH")
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		// fnm puts a per-shell link on PATH; nvm the directory itself.
		if r, err := filepath.EvalSymlinks(d); err == nil && strings.HasPrefix(r, vroot) && filepath.Base(r) == "bin" {
			return filepath.Dir(r)
		}
	}
	a := filepath.Join(root, alias)
	if fi, err := os.Lstat(a); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		// fnm: the alias is a link to the installation.
		if r, err := filepath.EvalSymlinks(a); err == nil && strings.HasPrefix(r, vroot) {
			return r
		}
		return ""
	}
	b, err := os.ReadFile(a)
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(b))
	if v == "" || strings.ContainsAny(v, "/\\") || strings.HasPrefix(v, ".") {
		return "" // lts/*, node: names nvm resolves itself
	}
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return filepath.Join(vroot, v)
}
