package protect

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
)

// TestAbsentBelow: a watched name is skipped only when its first
// component below the writable directory is absent; a link on the way,
// which neutralise must move, is never skipped. Control: the same names
// with nothing created are skipped.
func TestAbsentBelow(t *testing.T) {
	w := t.TempDir()
	watched := []string{".bashrc", ".vscode/settings.json", ".git/hooks/pre-commit"}
	var ks hostwalk.Kinds
	for _, rel := range watched {
		if !absentBelow(&ks, w, filepath.Join(w, rel)) {
			t.Errorf("control: %s with nothing created is not skipped", rel)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(w, ".vscode")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, ".bashrc"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ks = hostwalk.Kinds{}
	for _, rel := range watched[:2] {
		if absentBelow(&ks, w, filepath.Join(w, rel)) {
			t.Errorf("%s was skipped though its first component exists", rel)
		}
	}
	if !absentBelow(&ks, w, filepath.Join(w, watched[2])) {
		t.Errorf("%s is skipped no more though .git is still absent", watched[2])
	}
	if absentBelow(&ks, w, "/elsewhere/.bashrc") || absentBelow(&ks, w, w) {
		t.Error("a path not below w was skipped")
	}
}
