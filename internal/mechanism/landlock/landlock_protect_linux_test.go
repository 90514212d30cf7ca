package landlock

import "testing"

func TestOwnName(t *testing.T) {
	own := []string{"/data/sessions/s/home", "/data/caches/uid-1/npm"}
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/data/sessions/s/home/.bashrc", true},
		{"/data/caches/uid-1/npm/.npmrc", true},
		{"/data/sessions/s/home/.config/fish", true},
		{"/data/sessions/s/home/.git/config", false}, // git's held parts stay
		{"/data/sessions/s/home/.git", false},
		{"/work/.bashrc", false},
		{"/data/sessions/s/homeX/.bashrc", false},
		{"/data/sessions/s/.bashrc", false},
	} {
		if got := ownName(tt.path, own); got != tt.want {
			t.Errorf("ownName(%s) = %v, want %v", tt.path, got, tt.want)
		}
	}
}
