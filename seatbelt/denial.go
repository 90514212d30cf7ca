package seatbelt

import (
	"bufio"
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

// kernelSender is the image that writes Seatbelt's denials to the log.
const kernelSender = "/Sandbox"

// LogStreamArgs returns the arguments of /usr/bin/log that stream the
// entries that mention tag, one JSON object per line. The tag is checked
// to hold only [A-Za-z0-9_-], so it cannot change the predicate.
func LogStreamArgs(tag string) ([]string, error) {
	if !validTag(tag) {
		return nil, fmt.Errorf("%w: tag %q must be 8 to 64 bytes of [A-Za-z0-9_-]", ErrInvalidOptions, tag)
	}
	return []string{"stream", "--style", "ndjson", "--predicate", `eventMessage CONTAINS "` + tag + `"`}, nil
}

// logEntry is the part of one `log stream --style ndjson` object that
// ParseLine reads.
type logEntry struct {
	EventMessage    *string `json:"eventMessage"`
	ProcessID       *int64  `json:"processID"`
	SenderImagePath string  `json:"senderImagePath"`
	Timestamp       string  `json:"timestamp"`
}

// ParseLine reads one line of `log stream --style ndjson` output and
// returns the denial it reports for the run tagged tag.
//
// It returns ok == false, and no error, for every line that is not such a
// denial: the plain-text banner `log` prints first, blank lines, other
// messages, denials of other runs, and messages that were not written by
// the kernel's Sandbox extension (processID 0, or a sender image whose
// path ends in /Sandbox), so a process that can write to the log cannot
// forge a denial. A denial belongs to the run when its message ends with
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
	fromKernel := (e.ProcessID != nil && *e.ProcessID == 0) || strings.HasSuffix(e.SenderImagePath, kernelSender)
	if !fromKernel {
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
// than 1 MiB. It returns the first read error other than EOF.
func ReadDenials(r io.Reader, tag string, fn func(Denial)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	skipping := false
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
					if d, ok := ParseLine(buf, tag); ok {
						fn(d)
					}
				}
				skipping, buf = false, buf[:0]
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("seatbelt: read log stream: %w", err)
		}
	}
}
