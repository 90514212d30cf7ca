package limits

import (
	"fmt"
	"os"
	"strconv"
)

// DefaultInotify returns the per-sandbox inotify ceiling: the host's
// fs.inotify.max_user_instances and max_user_watches divided by
// InotifyShare, at least 1 each.
func DefaultInotify() (Inotify, error) {
	inst, err := readInt("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return Inotify{}, fmt.Errorf("limits: inotify ceiling: %w", err)
	}
	w, err := readInt("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return Inotify{}, fmt.Errorf("limits: inotify ceiling: %w", err)
	}
	return Inotify{Instances: max(inst/InotifyShare, 1), Watches: max(w/InotifyShare, 1)}, nil
}

// InotifyHeld counts the descriptors of inotify instances
// (anon_inode:inotify) that the processes pids hold open. An instance
// held by two descriptors counts twice: every instance shares one
// anonymous inode, so nothing tells them apart, and the count errs high.
func InotifyHeld(pids []int) int {
	n := 0
	for _, p := range pids {
		dir := "/proc/" + strconv.Itoa(p) + "/fd/"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if l, err := os.Readlink(dir + e.Name()); err == nil && l == "anon_inode:inotify" {
				n++
			}
		}
	}
	return n
}
