package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// SettingsFormat names a settings file sandbox-run reads besides its own
// profile: srt's (Anthropic's sandbox-runtime, ~/.srt-settings.json) or
// Claude Code's settings.json, whose "sandbox" block and Read/Edit/WebFetch
// permission rules configure the same runtime.
type SettingsFormat string

// The settings formats.
const (
	FormatSrt    SettingsFormat = "srt"
	FormatClaude SettingsFormat = "claude"
)

// SettingsFormats lists the formats ParseSettings reads.
func SettingsFormats() []SettingsFormat { return []SettingsFormat{FormatSrt, FormatClaude} }

// DetectSettingsFormat tells the two formats apart by their top-level
// keys: Claude Code's file holds "sandbox" or "permissions", srt's holds
// "network" and "filesystem".
func DetectSettingsFormat(b []byte) SettingsFormat {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil {
		_, sb := m["sandbox"]
		_, pm := m["permissions"]
		if sb || pm {
			return FormatClaude
		}
	}
	return FormatSrt
}

// SettingsBase is where a settings file's paths are resolved, as the tool
// that reads the file resolves them.
type SettingsBase struct {
	// Workdir is the command's directory: srt resolves a relative path
	// against it, Claude Code against the project (the same directory
	// when the command runs at the project's top). Absolute.
	Workdir string
	// Home is what "~" and "~/" expand to. Absolute; empty refuses every
	// path that starts with "~".
	Home string
	// Root is what a Claude Code permission rule's "/path" is relative
	// to: the directory that holds the settings file's .claude directory
	// (see SettingsRoot).
	Root string
}

// SettingsRoot returns the directory a Claude Code permission rule's
// "/path" is relative to, for the settings file at the absolute path
// file: the project that holds .claude/settings.json, else the file's
// directory.
func SettingsRoot(file string) string {
	dir := filepath.Dir(file)
	if filepath.Base(dir) == ".claude" {
		return filepath.Dir(dir)
	}
	return dir
}

// Status is what became of one settings key.
type Status string

// The statuses of a key. Refused keys make ParseSettings fail.
const (
	// StatusApplied: the key changed the policy.
	StatusApplied Status = "applied"
	// StatusHeld: sandbox-run already holds this, or something stricter,
	// without a change.
	StatusHeld Status = "held"
	// StatusNotApplicable: the key configures the tool itself (its
	// binaries, prompts, violation log), not what the command may do.
	StatusNotApplicable Status = "not applicable"
	// StatusRefused: the key weakens the sandbox, needs what this build
	// lacks, or cannot be held as written.
	StatusRefused Status = "refused"
)

// KeyOutcome is what became of one key of a settings file, with why.
type KeyOutcome struct {
	Key    string `json:"key"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// SettingsError is a settings key sandbox-run refuses. Weakens says the
// key asks for less isolation than sandbox-run gives; Missing names the
// sandbox-run feature the key needs and this build lacks.
type SettingsError struct {
	Key     string
	Reason  string
	Fix     string
	Weakens bool
	Missing string
}

func (e *SettingsError) Error() string {
	return fmt.Sprintf("settings: %s: %s; fix: %s", e.Key, e.Reason, e.Fix)
}

// Is matches ErrInvalid: the settings cannot be enforced as written.
func (e *SettingsError) Is(target error) bool { return target == ErrInvalid }

// Settings is the result of reading a settings file onto a policy.
type Settings struct {
	Format SettingsFormat
	// Policy is the input policy with the file's keys applied.
	Policy Policy
	// Keys says, for every key the file holds, what became of it, sorted
	// by key.
	Keys []KeyOutcome
}

// ParseSettings reads a settings file of the given format (b, at most
// MaxProfileSize bytes) and applies it onto p: allowed hosts, writable,
// read-only and protected paths are added to p's own. Every key is
// applied, held, not applicable, or refused; the first refusal is
// returned as a *SettingsError (wrapping ErrInvalid), and then Settings
// still lists every key. A key sandbox-run does not know is refused: a
// typo must not drop a restriction. Pure: it touches no file; p is not
// validated (Validate does that).
func ParseSettings(format SettingsFormat, b []byte, base SettingsBase, p Policy) (Settings, error) {
	out := Settings{Format: format}
	if len(b) > MaxProfileSize {
		return out, fmt.Errorf("policy: settings: larger than %d bytes", MaxProfileSize)
	}
	if err := uniqueKeys(b); err != nil {
		return out, fmt.Errorf("policy: settings: %w", err)
	}
	var rules map[string]handler
	switch format {
	case FormatSrt:
		rules = srtKeys
	case FormatClaude:
		rules = claudeKeys
	default:
		return out, invalid("settings", fmt.Sprintf("%q is not a settings format", format), "name srt or claude")
	}
	s := &settingsRun{p: p, base: base, format: format}
	s.p.Write = append([]string(nil), p.Write...)
	s.p.Read = append([]string(nil), p.Read...)
	s.p.Protect = append([]string(nil), p.Protect...)
	s.p.AllowHosts = append([]string(nil), p.AllowHosts...)
	if err := object(rules)(s, "", json.RawMessage(b)); err != nil {
		s.refuse(err)
	}
	s.finish()
	sort.SliceStable(s.out, func(i, j int) bool { return s.out[i].Key < s.out[j].Key })
	out.Policy, out.Keys = s.p, s.out
	return out, s.err
}

// handler reads one key's value.
type handler func(s *settingsRun, key string, raw json.RawMessage) error

// settingsRun is one ParseSettings call.
type settingsRun struct {
	p      Policy
	base   SettingsBase
	format SettingsFormat
	out    []KeyOutcome
	err    error
	// Collected for finish: path lists need each other (an allowRead
	// reopens a denyRead), denied hosts need every allowed one.
	allowRead, denyRead, allowWrite, denyWrite []pathEntry
	allowHosts, denyHosts                      []hostEntry
}

type pathEntry struct{ key, spelled, path string }
type hostEntry struct{ key, host string }

func (s *settingsRun) note(key string, st Status, format string, a ...any) {
	s.out = append(s.out, KeyOutcome{Key: key, Status: st, Detail: fmt.Sprintf(format, a...)})
}

// refuse records a refusal; the first one is the error ParseSettings
// returns.
func (s *settingsRun) refuse(err error) {
	var se *SettingsError
	if errors.As(err, &se) {
		s.out = append(s.out, KeyOutcome{Key: se.Key, Status: StatusRefused, Detail: se.Reason})
	}
	if s.err == nil {
		s.err = err
	}
}

// object reads a JSON object whose keys rules names, in sorted order; a
// key rules does not name is refused.
func object(rules map[string]handler) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		var m map[string]json.RawMessage
		if err := strictDecode(raw, &m); err != nil || m == nil {
			return &SettingsError{Key: orRoot(key), Reason: "not a JSON object", Fix: "write an object: {\"key\": value, ...}"}
		}
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			full := k
			if key != "" {
				full = key + "." + k
			}
			h, ok := rules[k]
			if !ok {
				h, ok = rules["*"] // the object's other keys, where it has a rule for them
			}
			if !ok {
				s.refuse(&SettingsError{Key: full, Reason: fmt.Sprintf("not a key sandbox-run knows in %s's settings", s.format),
					Fix: "remove it or correct its spelling (docs/settings.md lists the keys)"})
				continue
			}
			if err := h(s, full, m[k]); err != nil {
				s.refuse(err)
			}
		}
		return nil
	}
}

func orRoot(key string) string {
	if key == "" {
		return "(the file)"
	}
	return key
}

func strictDecode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err == nil {
		return errors.New("trailing data")
	}
	return nil
}

// notApplicable is a key that configures the tool itself.
func notApplicable(why string) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		s.note(key, StatusNotApplicable, "%s", why)
		return nil
	}
}

// weakensIfTrue is a boolean that, true, asks for less isolation.
func weakensIfTrue(what string) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		var v bool
		if err := strictDecode(raw, &v); err != nil {
			return &SettingsError{Key: key, Reason: "not true or false", Fix: "write true or false"}
		}
		if v {
			return &SettingsError{Key: key, Weakens: true, Reason: "true weakens the sandbox: " + what,
				Fix: "remove " + key + " or set it to false"}
		}
		s.note(key, StatusHeld, "false: sandbox-run never does this")
		return nil
	}
}

// heldBool is a boolean whose either value sandbox-run already holds (or
// exceeds): why says how.
func heldBool(why string) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		var v bool
		if err := strictDecode(raw, &v); err != nil {
			return &SettingsError{Key: key, Reason: "not true or false", Fix: "write true or false"}
		}
		s.note(key, StatusHeld, "%v: %s", v, why)
		return nil
	}
}

// weakensIfAny is a list that, not empty, asks for less isolation.
func weakensIfAny(what string) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		var v []json.RawMessage
		if err := strictDecode(raw, &v); err != nil {
			return &SettingsError{Key: key, Reason: "not a list", Fix: "write a JSON list"}
		}
		if len(v) > 0 {
			return &SettingsError{Key: key, Weakens: true, Reason: "weakens the sandbox: " + what, Fix: "remove " + key + " or leave it empty"}
		}
		s.note(key, StatusHeld, "empty")
		return nil
	}
}

// stringList decodes a JSON list of strings.
func stringList(key string, raw json.RawMessage) ([]string, error) {
	var v []string
	if err := strictDecode(raw, &v); err != nil {
		return nil, &SettingsError{Key: key, Reason: "not a list of strings", Fix: "write a JSON list of strings"}
	}
	for i, e := range v {
		if strings.IndexByte(e, 0) >= 0 || e == "" {
			return nil, &SettingsError{Key: fmt.Sprintf("%s[%d]", key, i), Reason: "empty or holds a NUL byte", Fix: "remove the entry"}
		}
	}
	return v, nil
}

// heldBoolOrNumber is a tuning value sandbox-run holds or exceeds
// whatever it is.
func heldBoolOrNumber(why string) handler {
	return func(s *settingsRun, key string, raw json.RawMessage) error {
		s.note(key, StatusHeld, "%s: %s", strings.TrimSpace(string(raw)), why)
		return nil
	}
}

// Profile returns the policy as a profile (the --config format): what
// `sandbox-run import` prints. Parse reads it back as the same Policy.
func (s Settings) Profile() ([]byte, error) {
	b, err := json.MarshalIndent(s.Policy, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
