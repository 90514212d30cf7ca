package protect

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/hostwalk"
	"github.com/sandbox-run/sandbox-run/policy"
)

// BenchmarkProtect is the start-up cost of protected paths on one
// workdir: the walk for git directories plus the layout's lstats (binding
// is bwrap's). A run's end walks once more when it settles its journal.
// Workdirs of 0, 10, 1000 and 20,000 files (100 per directory), and of 1
// and 30 nested repositories.
func BenchmarkProtect(b *testing.B) {
	for _, c := range []struct {
		name         string
		files, repos int
	}{
		{"files=0", 0, 0}, {"files=10", 10, 0}, {"files=1000", 1000, 0}, {"files=20000", 20000, 0},
		{"repos=1", 0, 1}, {"repos=30", 0, 30},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := b.TempDir()
			for i := 0; i < c.files; i++ {
				d := filepath.Join(w, fmt.Sprintf("d%03d", i/100))
				if i%100 == 0 {
					os.MkdirAll(d, 0o755)
				}
				os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", i%100)), nil, 0o644)
			}
			for i := 0; i < c.repos; i++ {
				g := filepath.Join(w, fmt.Sprintf("r%02d/sub", i), ".git")
				for _, d := range []string{"objects", "refs", "hooks", "info"} {
					os.MkdirAll(filepath.Join(g, d), 0o755)
				}
				os.WriteFile(filepath.Join(g, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
				os.WriteFile(filepath.Join(g, "config"), []byte("[core]\n"), 0o644)
			}
			names := policy.Policy{Workdir: w}.ProtectedNames()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				g := hostwalk.FindGit([]string{w}, hostwalk.Bounds{})
				if _, err := protectLayout([]string{w}, names, g.Dirs, g.Files, hostwalk.LstatKind); err != nil {
					b.Fatal(err)
				}
				if len(g.Dirs) != c.repos {
					b.Fatalf("found %d repositories, want %d", len(g.Dirs), c.repos)
				}
			}
		})
	}
}
