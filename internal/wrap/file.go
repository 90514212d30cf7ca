package wrap

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// BackupSuffix names the backup Apply writes beside the file.
const BackupSuffix = ".sandbox-run.bak"

// Errors Apply and Undo return, for errors.Is.
var (
	ErrBackupExists = errors.New("a backup from an earlier wrap exists")
	ErrNoBackup     = errors.New("no backup to restore")
	ErrChanged      = errors.New("the file changed while it was being wrapped")
)

// Backup is the backup path of the config at path.
func Backup(path string) string { return path + BackupSuffix }

// Apply writes p.New to path: first p.Old to the backup beside it (never
// over an existing backup, which holds the file as it was before an
// earlier wrap), then the new bytes to a temporary file in the same
// directory renamed over path, with path's mode and owner. path is read
// once more just before the rename: a client that rewrote the file
// meanwhile (Claude Code rewrites ~/.claude.json often) keeps its change,
// and Apply fails with ErrChanged, removing its backup.
func Apply(path string, p *Plan) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	bak := Backup(path)
	if _, err := os.Lstat(bak); err == nil {
		return fmt.Errorf("%w: %s", ErrBackupExists, bak)
	}
	if err := writeNew(bak, p.Old, fi); err != nil {
		return fmt.Errorf("writing the backup %s: %w", bak, err)
	}
	cur, err := os.ReadFile(path)
	if err == nil && !bytes.Equal(cur, p.Old) {
		err = fmt.Errorf("%w: %s", ErrChanged, path)
	}
	if err == nil {
		err = replace(path, p.New, fi)
	}
	if err != nil {
		_ = os.Remove(bak)
	}
	return err
}

// Undo puts the backup of path back in its place, byte for byte, and
// removes the backup.
func Undo(path string) error {
	bak := Backup(path)
	old, err := os.ReadFile(bak)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist", ErrNoBackup, bak)
	}
	if err != nil {
		return err
	}
	fi, err := os.Stat(bak)
	if err != nil {
		return err
	}
	if err := replace(path, old, fi); err != nil {
		return err
	}
	return os.Remove(bak)
}

// replace writes b to a new file beside path and renames it over path.
func replace(path string, b []byte, like fs.FileInfo) error {
	tmp, err := temp(path, b, like)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// writeNew writes b to path, which must not exist: a temporary file
// linked to path, which fails if path appeared meanwhile.
func writeNew(path string, b []byte, like fs.FileInfo) error {
	tmp, err := temp(path, b, like)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", ErrBackupExists, path)
		}
		return err
	}
	return nil
}

// temp writes b to a new file in path's directory with like's mode and
// (where the system has them) owner, synced, and returns its name.
func temp(path string, b []byte, like fs.FileInfo) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".sandbox-run-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	err = f.Chmod(like.Mode().Perm())
	if err == nil {
		err = chown(f, like)
	}
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// projectFiles are the project configs Locate looks for, in this order.
var projectFiles = []string{".mcp.json", ".vscode/mcp.json", ".cursor/mcp.json", ".gemini/settings.json"}

// ErrNoConfig says Locate found no config, or more than one.
var ErrNoConfig = errors.New("no single MCP config found")

// Locate is the config wrap edits: arg, else the one project config in
// dir; links are followed (a config kept in a dotfiles repository is
// edited there, and the link stays).
func Locate(arg, dir string) (string, error) {
	if arg == "" {
		var found []string
		for _, f := range projectFiles {
			p := filepath.Join(dir, f)
			if _, err := os.Stat(p); err == nil {
				found = append(found, p)
			}
		}
		if len(found) != 1 {
			return "", fmt.Errorf("%w in %s (found %d of %v)", ErrNoConfig, dir, len(found), projectFiles)
		}
		arg = found[0]
	}
	p, err := filepath.Abs(arg)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(p)
}
