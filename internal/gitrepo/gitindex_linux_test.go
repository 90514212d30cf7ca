package gitrepo

import "testing"

// TestIndexGitlinksRefusesGarbage: a truncated or forged index is
// refused, never read past its end.
func TestIndexGitlinksRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("DIRC"), []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x05"),
		append([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"), make([]byte, 70)...)} {
		if links, err := indexGitlinks(b); err == nil {
			t.Errorf("indexGitlinks(%q) = %v, want an error", b, links)
		}
	}
}
