package policy

import (
	"errors"
	"fmt"
)

// systemReadable are the directories every Linux sandbox mounts
// read-only whole (the sandbox package binds this list): a read deny
// inside one cannot be held.
var systemReadable = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// SystemReadable returns a copy of the system directories a Linux
// sandbox mounts read-only.
func SystemReadable() []string { return append([]string(nil), systemReadable...) }

// privateTmp are the spellings of the private /tmp every sandbox gets:
// writable, and nothing of the host's.
var privateTmp = []string{"/tmp", "/private/tmp"}

// invalidDetail is an *InvalidError's Detail (its text without the
// field), or the text of another error.
func invalidDetail(err error) string {
	if ie := (*InvalidError)(nil); errors.As(err, &ie) {
		return ie.Detail()
	}
	return err.Error()
}

// finishWrite adds allowWrite paths as writable directories and
// denyWrite paths as protected paths.
func (s *settingsRun) finishWrite() {
	for _, e := range s.allowWrite {
		switch w, in := s.inWritable(e.path); {
		case contains(privateTmp, e.path):
			s.note(e.key, StatusHeld, "%q: the command has a private writable /tmp of its own (the host's is not shared)", e.spelled)
		case in:
			s.note(e.key, StatusHeld, "%q lies in %s, writable already", e.spelled, w)
		default:
			if err := (Host{Home: nonEmpty(s.base.Home)}).CheckWritable(e.spelled, e.path); err != nil {
				s.refuse(&SettingsError{Key: e.key, Reason: invalidDetail(err), Fix: "remove the entry or name a project directory"})
				continue
			}
			s.p.Write = appendNew(s.p.Write, e.path)
			s.note(e.key, StatusApplied, "%q writable (--write %s)", e.spelled, e.path)
		}
	}
	for _, e := range s.denyWrite {
		if _, in := s.inWritable(e.path); !in {
			s.note(e.key, StatusHeld, "%q is not writable in the sandbox at all", e.spelled)
			continue
		}
		s.p.Protect = appendNew(s.p.Protect, e.path)
		s.note(e.key, StatusApplied, "%q protected (held read-only; quarantined if the command creates it)", e.spelled)
	}
}

// finishRead adds allowRead paths as read-only paths and holds a
// denyRead path that the sandbox does not mount; one in a mounted
// directory, or one holding a mounted directory that no allowRead
// reopens, is refused.
func (s *settingsRun) finishRead() {
	for _, e := range s.allowRead {
		if m, in := s.inMounted(e.path); in {
			s.note(e.key, StatusHeld, "%q lies in %s, mounted already", e.spelled, m)
			continue
		}
		s.p.Read = appendNew(s.p.Read, e.path)
		s.note(e.key, StatusApplied, "%q readable (--read %s)", e.spelled, e.path)
	}
	for _, e := range s.denyRead {
		if m, in := s.inMounted(e.path); in {
			s.refuse(&SettingsError{Key: e.key, Reason: fmt.Sprintf("%q lies in %s, which the sandbox mounts whole: sandbox-run cannot hide a part of it", e.spelled, m),
				Fix: "move it out of " + m + ", or remove the entry"})
			continue
		}
		if m, ok := s.mountedUnder(e.path); ok {
			s.refuse(&SettingsError{Key: e.key, Reason: fmt.Sprintf("%q holds %s, which the sandbox mounts and no allowRead entry reopens", e.spelled, m),
				Fix: "add " + m + " to allowRead, or narrow the entry"})
			continue
		}
		s.note(e.key, StatusHeld, "%q is not mounted in the sandbox: the command cannot see it", e.spelled)
	}
}

func (s *settingsRun) inWritable(p string) (string, bool) {
	for _, w := range s.p.Writable() {
		if w != "" && Within(p, w) {
			return w, true
		}
	}
	return "", false
}

// mounted lists what the sandbox shows of the host.
func (s *settingsRun) mounted() []string {
	m := append(SystemReadable(), s.p.Writable()...)
	return append(m, s.p.Read...)
}

func (s *settingsRun) inMounted(p string) (string, bool) {
	for _, m := range s.mounted() {
		if m != "" && Within(p, m) {
			return m, true
		}
	}
	return "", false
}

// mountedUnder names a mounted path inside p that no allowRead reopens.
func (s *settingsRun) mountedUnder(p string) (string, bool) {
	for _, m := range s.mounted() {
		if m == "" || !Within(m, p) {
			continue
		}
		reopened := false
		for _, a := range s.allowRead {
			if Within(m, a.path) {
				reopened = true
			}
		}
		if !reopened {
			return m, true
		}
	}
	return "", false
}

func contains(list []string, v string) bool {
	for _, e := range list {
		if e == v {
			return true
		}
	}
	return false
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
