package seatbelt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Denial is one operation Seatbelt refused to a process of a run, as the
// kernel logged it.
type Denial struct {
	// Time is the log entry's timestamp as `log` printed it.
	Time string `json:"time,omitempty"`
	// Process and PID name the process that was refused.
	Process string `json:"process"`
	PID     int    `json:"pid"`
	// Operation is the SBPL operation: file-read-data, file-write-create,
	// network-outbound, mach-lookup, sysctl-read, ...
	Operation string `json:"operation"`
	// Target is what the operation was on: a path, an address such as
	// 1.2.3.4:443, a Mach service or sysctl name. It may be empty.
	Target string `json:"target,omitempty"`
}

// The two writers of Seatbelt's denials to the unified log:
//
//   - the kernel's Sandbox extension: processID 0 (the kernel) and a
//     sender image whose path ends in /Sandbox. Both are required: a
//     process of the user's cannot log as pid 0, but it can be a binary
//     named Sandbox anywhere, and the sender image of its own messages is
//     its own path.
//   - sandboxd's reports, subsystem com.apple.sandbox.reporting, from the
//     process /usr/libexec/sandboxd. Any process may name that subsystem in
//     os_log_create, so the process image is required too; /usr/libexec is
//     on the sealed system volume, where no user can put a binary.
//
// Neither shape has been observed by this project on a Mac (see
// testdata/README.md); both follow what the peers' denial readers accept.
const (
	kernelSenderSuffix = "/Sandbox"
	reportingSubsystem = "com.apple.sandbox.reporting"
	reportingProcess   = "/usr/libexec/sandboxd"
)

// LogStreamArgs returns the arguments of /usr/bin/log that stream the
// entries of both denial writers that mention tag, one JSON object per
// line. The tag is checked to hold only [A-Za-z0-9_-], so it cannot change
// the predicate.
func LogStreamArgs(tag string) ([]string, error) {
	if !validTag(tag) {
		return nil, fmt.Errorf("%w: tag %q must be 8 to 64 bytes of [A-Za-z0-9_-]", ErrInvalidOptions, tag)
	}
	pred := `eventMessage CONTAINS "` + tag + `" AND ((processID == 0 AND senderImagePath ENDSWITH "` + kernelSenderSuffix +
		`") OR (subsystem == "` + reportingSubsystem + `" AND processImagePath == "` + reportingProcess + `"))`
	return []string{"stream", "--style", "ndjson", "--info", "--predicate", pred}, nil
}

// logEntry is the part of one `log stream --style ndjson` object that
// ParseLine reads.
type logEntry struct {
	EventMessage     *string `json:"eventMessage"`
	ProcessID        *int64  `json:"processID"`
	SenderImagePath  string  `json:"senderImagePath"`
	ProcessImagePath string  `json:"processImagePath"`
	Subsystem        string  `json:"subsystem"`
	Timestamp        string  `json:"timestamp"`
}

// fromSandbox reports whether e was written by one of the two writers of
// denials (see kernelSenderSuffix).
func (e logEntry) fromSandbox() bool {
	kernel := e.ProcessID != nil && *e.ProcessID == 0 && strings.HasSuffix(e.SenderImagePath, kernelSenderSuffix)
	reporting := e.Subsystem == reportingSubsystem && e.ProcessImagePath == reportingProcess
	return kernel || reporting
}

// ParseLine reads one line of `log stream --style ndjson` output and
// returns the denial it reports for the run tagged tag.
//
// It returns ok == false, and no error, for every line that is not such a
// denial: the plain-text banner `log` prints first, blank lines, other
// messages, denials of other runs, and messages that were not written by
// the kernel's Sandbox extension (processID 0 and a sender image whose
// path ends in /Sandbox, both) or by sandboxd's reporting subsystem, so a
// process that can write to the log cannot forge a denial. A denial belongs to the run when its message ends with
// the tag, as the last word of the message: the tag of (with message ...)
// is appended to the kernel's message, and matching at the end means a
// path that merely contains another run's tag is not attributed to it.
func ParseLine(line []byte, tag string) (d Denial, ok bool) {
	if tag == "" {
		return Denial{}, false
	}
	var e logEntry
	if err := json.Unmarshal(line, &e); err != nil || e.EventMessage == nil {
		return Denial{}, false
	}
	if !e.fromSandbox() {
		return Denial{}, false
	}
	msg := strings.TrimRight(*e.EventMessage, " \t\r\n")
	rest, found := strings.CutSuffix(msg, tag)
	if !found || (rest != "" && !isSpace(rest[len(rest)-1])) {
		return Denial{}, false
	}
	d, ok = parseMessage(strings.TrimRight(rest, " \t\r\n"))
	if !ok {
		return Denial{}, false
	}
	d.Time = e.Timestamp
	return d, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// parseMessage reads the kernel's text, "Sandbox: NAME(PID) deny(N) OP
// TARGET", where NAME may itself hold spaces and parentheses and TARGET
// spaces. Only its first line is read.
func parseMessage(msg string) (Denial, bool) {
	msg, _, _ = strings.Cut(msg, "\n")
	after, ok := strings.CutPrefix(strings.TrimLeft(msg, " \t"), "Sandbox:")
	if !ok {
		return Denial{}, false
	}
	after = strings.TrimLeft(after, " \t")
	const marker = ") deny("
	i := strings.Index(after, marker)
	if i < 0 {
		return Denial{}, false
	}
	open := strings.LastIndexByte(after[:i], '(')
	if open <= 0 {
		return Denial{}, false
	}
	pid, err := strconv.Atoi(after[open+1 : i])
	if err != nil || pid < 0 {
		return Denial{}, false
	}
	name := strings.TrimRight(after[:open], " \t")
	rest := after[i+len(marker):]
	close := strings.IndexByte(rest, ')')
	if close < 0 {
		return Denial{}, false
	}
	if _, err := strconv.Atoi(rest[:close]); err != nil {
		return Denial{}, false
	}
	rest = strings.TrimLeft(rest[close+1:], " \t")
	op, target, _ := strings.Cut(rest, " ")
	if name == "" || !validOperation(op) {
		return Denial{}, false
	}
	return Denial{Process: name, PID: pid, Operation: op, Target: strings.TrimSpace(target)}, true
}

func validOperation(op string) bool {
	if op == "" {
		return false
	}
	for i := 0; i < len(op); i++ {
		c := op[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '*' || c == '_') {
			return false
		}
	}
	return true
}

// maxLine bounds one line of log output; longer lines are skipped whole.
const maxLine = 1 << 20

// ReadDenials reads `log stream --style ndjson` output from r until EOF and
// calls fn for every denial of the run tagged tag, in order. Lines that are
// not such denials are skipped (see ParseLine), and so are lines longer
// than 1 MiB and known noise (IsNoise). It returns the first read error
// other than EOF.
func ReadDenials(r io.Reader, tag string, fn func(Denial)) error {
	_, err := readStream(r, tag, nil, fn)
	return err
}

// StreamStats counts what one stream held besides the denials passed on.
type StreamStats struct {
	// Banner is true when the stream printed `log`'s banner.
	Banner bool `json:"banner"`
	// Denials were passed on; Noise were the run's denials skipped as
	// known noise (IsNoise).
	Denials int `json:"denials"`
	Noise   int `json:"noise"`
}

// banner is how `log stream` starts its output once the stream is set up:
// `Filtering the log data using "PREDICATE"`. Anything it prints instead
// (on stderr: "Must be admin to run 'stream' command", an invalid
// predicate) means no denial will ever come.
const banner = "Filtering the log data"

// IsBanner reports whether line is `log stream`'s banner.
func IsBanner(line []byte) bool { return bytes.HasPrefix(line, []byte(banner)) }

// readStream reads r line by line: the banner calls onBanner (once), every
// line (the banner's too, which is no JSON) goes to ParseLine, so a
// first line that is already a denial is not lost.
func readStream(r io.Reader, tag string, onBanner func(), fn func(Denial)) (StreamStats, error) {
	var st StreamStats
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	skipping := false
	line := func(b []byte) {
		if !st.Banner && IsBanner(b) {
			st.Banner = true
			if onBanner != nil {
				onBanner()
			}
			return
		}
		if d, ok := ParseLine(b, tag); ok {
			if IsNoise(d) {
				st.Noise++
				return
			}
			st.Denials++
			fn(d)
		}
	}
	for {
		chunk, isPrefix, err := br.ReadLine()
		if len(chunk) > 0 || (err == nil && !isPrefix) {
			if !skipping {
				buf = append(buf, chunk...)
				if len(buf) > maxLine {
					skipping, buf = true, buf[:0]
				}
			}
			if !isPrefix {
				if !skipping {
					line(buf)
				}
				skipping, buf = false, buf[:0]
			}
		}
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("seatbelt: read log stream: %w", err)
		}
	}
}

// noise are denials that libSystem itself causes in every sandboxed
// process, whatever it runs, and that say nothing about the command: its
// logging and analytics clients look up their daemons, which the profile
// does not let it reach. They are counted (StreamStats.Noise), not
// reported.
var noise = []struct{ op, target string }{
	{"mach-lookup", "com.apple.logd"},
	{"mach-lookup", "com.apple.logd.events"},
	{"mach-lookup", "com.apple.diagnosticd"},
	{"mach-lookup", "com.apple.analyticsd"},
	{"mach-lookup", "com.apple.analyticsd.messagetracer"},
}

// IsNoise reports whether d is one of the known noise denials.
func IsNoise(d Denial) bool {
	for _, n := range noise {
		if d.Operation == n.op && d.Target == n.target {
			return true
		}
	}
	return false
}
