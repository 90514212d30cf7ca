package plan

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/sandbox-run/sandbox-run/internal/fault"
	"github.com/sandbox-run/sandbox-run/pathguard"
	"github.com/sandbox-run/sandbox-run/policy"
)

// PrepareState turns the policy's Session and Caches into host
// directories and variables: a session's home is
// DataDir/sessions/NAME/home, a cache DataDir/caches/uid-UID/NAME, each
// made by pathguard (no link followed, 0700, owned by the sandbox's uid)
// and bound writable at its own path like a Write directory, so every
// vetting of writable directories applies to it. The returned policy has
// Home set to the session's home, the caches appended to Write and the
// cache variables in Env below the policy's own values.
//
// The caches live under the data directory of the user running
// sandbox-run (DataDir/caches/uid-UID/NAME) and are named after the
// sandbox's uid, so two users never share one. A cache is as trusted as the runs that wrote it: a run that
// poisons it (a planted package, a cargo config, a go build cache entry)
// reaches later runs of the same user and uid, never anyone else's.
func PrepareState(p policy.Policy, dataDir string, uid, gid int) (policy.Policy, []string, error) {
	if p.Session == "" && len(p.Caches) == 0 {
		return p, nil, nil
	}
	var own []string
	env := map[string]string{}
	if p.Session != "" {
		if dataDir == "" {
			return p, nil, fault.New("--session "+p.Session, "there is no data directory to keep it in (neither $XDG_DATA_HOME nor $HOME is set)", "set HOME, or pass --home DIR")
		}
		dir := filepath.Join(dataDir, "sessions", p.Session)
		home, err := stateDir(dataDir, []string{"sessions", p.Session}, "home", uid, gid)
		if err != nil {
			return p, nil, fault.New("--session "+p.Session, "cannot make its home in "+dir+": "+err.Error(), "check that "+dataDir+" is yours and closed to others")
		}
		p.Home = home
		own = append(own, home)
	}
	if len(p.Caches) > 0 {
		if dataDir == "" {
			return p, nil, fault.New("--cache", "there is no data directory to keep caches in (neither $XDG_DATA_HOME nor $HOME is set)", "set HOME, or leave out --cache")
		}
		rel := []string{"caches", "uid-" + strconv.Itoa(uid)}
		base := filepath.Join(append([]string{dataDir}, rel...)...)
		write := append([]string(nil), p.Write...)
		for _, name := range p.Caches {
			dir, err := stateDir(dataDir, rel, name, uid, gid)
			if err != nil {
				return p, nil, fault.New("--cache "+name, "cannot make it in "+base+": "+err.Error(), "check that "+dataDir+" is yours and closed to others")
			}
			write = append(write, dir)
			own = append(own, dir)
			for k, v := range policy.CacheEnv(name, dir) {
				env[k] = v
			}
		}
		p.Write = write
	}
	for k, v := range p.Env {
		env[k] = v
	}
	p.Env = env
	return p, own, nil
}

// stateDir makes root/rel.../leaf for uid:gid: root and rel as private
// directories of the effective uid (pathguard.OpenPrivateDir), leaf as a
// 0700 directory owned by uid (pathguard's ChildDir). When sandbox-run is
// root and the sandbox runs as another uid, bwrap runs as that uid and must
// be able to reach leaf: root and rel become 0711, searchable but not
// listable by others (which is why root keeps them in /var/lib, not under
// /root, which is closed).
func stateDir(root string, rel []string, leaf string, uid, gid int) (string, error) {
	parent := filepath.Join(append([]string{root}, rel...)...)
	d, err := pathguard.OpenPrivateDir(parent)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if os.Geteuid() == 0 && uid != 0 {
		// Every one of them is root's own, just opened without a link on
		// the way, in directories only root may write.
		p := root
		for i := 0; ; i++ {
			if err := os.Chmod(p, 0o711); err != nil {
				return "", err
			}
			if i == len(rel) {
				break
			}
			p = filepath.Join(p, rel[i])
		}
	}
	return d.ChildDir(leaf, uid, gid)
}
