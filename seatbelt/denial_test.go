package seatbelt

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// The sample file is constructed, not recorded: see testdata/README.md.
const sampleTag = "sandbox-run-0123456789abcdef"

func TestReadDenialsConstructedSample(t *testing.T) {
	f, err := os.Open("testdata/constructed-log-stream.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Denial
	if err := ReadDenials(f, sampleTag, func(d Denial) { got = append(got, d) }); err != nil {
		t.Fatal(err)
	}
	want := []Denial{
		{Time: "2026-11-29 17:40:01.100001+0000", Process: "cat", PID: 50101, Operation: "file-read-data", Target: "/Users/alice/.ssh/id_ed25519"},
		{Time: "2026-11-29 17:40:01.200002+0000", Process: "curl", PID: 50102, Operation: "network-outbound", Target: "93.184.216.34:443"},
		{Time: "2026-11-29 17:40:01.300003+0000", Process: "sh", PID: 50103, Operation: "file-write-create", Target: "/Users/alice/job/.git/hooks/pre-commit"},
		{Time: "2026-11-29 17:40:01.400004+0000", Process: "python3.12", PID: 50104, Operation: "mach-lookup", Target: "com.apple.dnssd.service"},
		{Time: "2026-11-29 17:40:01.500005+0000", Process: "Google Chrome Helper (Renderer)", PID: 50105, Operation: "file-read-data", Target: "/Users/alice/My Documents/tax 2026.pdf"},
		{Time: "2026-11-29 17:40:01.600006+0000", Process: "node", PID: 50106, Operation: "sysctl-read", Target: "kern.procargs2"},
		{Time: "2026-11-29 17:40:01.700007+0000", Process: "git", PID: 50107, Operation: "network-outbound", Target: "/private/var/run/mDNSResponder"},
		{Time: "2026-11-29 17:40:01.800008+0000", Process: "bash", PID: 50108, Operation: "process-info-pidinfo"},
		{Time: "2026-11-29 17:40:02.700008+0000", Process: "ls", PID: 50112, Operation: "file-read-data", Target: "/Users"},
		// sandboxd's report; the two forged lines after it (a binary named
		// Sandbox, a pid-0 line with another sender) and the forged report
		// are not denials, and mach-lookup com.apple.logd is noise.
		{Time: "2026-11-29 17:40:02.900001+0000", Process: "node", PID: 50115, Operation: "file-write-create", Target: "/Users/alice/job/.GIT/hooks/post-checkout"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("denials:\n got %+v\nwant %+v", got, want)
	}

	// The other run's tag sees only its own line.
	f.Seek(0, 0)
	var other []Denial
	ReadDenials(f, "sandbox-run-fedcba9876543210", func(d Denial) { other = append(other, d) })
	if len(other) != 2 || other[0].PID != 60201 || other[1].PID != 60202 {
		t.Errorf("other run: %+v", other)
	}
}

func TestParseLine(t *testing.T) {
	const k = `,"processID":0,"senderImagePath":"/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox"`
	for _, tc := range []struct {
		name string
		line string
		want *Denial
	}{
		{"tag on its own line", `{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /x\n` + sampleTag + `"` + k + `}`,
			&Denial{Process: "a", PID: 1, Operation: "file-read-data", Target: "/x"}},
		{"tag after a tab, trailing newline", `{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /x\t` + sampleTag + `\n"` + k + `}`,
			&Denial{Process: "a", PID: 1, Operation: "file-read-data", Target: "/x"}},
		{"sender image without pid 0", `{"eventMessage":"Sandbox: a(1) deny(2) file-write-unlink /x ` + sampleTag + `","senderImagePath":"/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox","processID":77}`, nil},
		{"forged: a binary named Sandbox", `{"eventMessage":"Sandbox: a(1) deny(2) file-write-unlink /x ` + sampleTag + `","senderImagePath":"/tmp/Sandbox","processImagePath":"/tmp/Sandbox","processID":4242}`, nil},
		{"pid 0 without the sender", `{"eventMessage":"Sandbox: a(1) deny(2) file-write-unlink /x ` + sampleTag + `","senderImagePath":"/usr/lib/libfoo.dylib","processID":0}`, nil},
		{"pid 0 and sender", `{"eventMessage":"Sandbox: a(1) deny(2) file-write-unlink /x ` + sampleTag + `","senderImagePath":"/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox","processID":0}`,
			&Denial{Process: "a", PID: 1, Operation: "file-write-unlink", Target: "/x"}},
		{"name with parens", `{"eventMessage":"Sandbox: a (b)(c)(12) deny(1) mach-lookup x ` + sampleTag + `"` + k + `}`,
			&Denial{Process: "a (b)(c)", PID: 12, Operation: "mach-lookup", Target: "x"}},
		{"tag glued to path", `{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /x` + sampleTag + `"` + k + `}`, nil},
		{"no tag", `{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /x"` + k + `}`, nil},
		{"allow, not deny", `{"eventMessage":"Sandbox: a(1) allow(1) file-read-data /x ` + sampleTag + `"` + k + `}`, nil},
		{"no pid", `{"eventMessage":"Sandbox: a deny(1) file-read-data /x ` + sampleTag + `"` + k + `}`, nil},
		{"bad pid", `{"eventMessage":"Sandbox: a(x) deny(1) file-read-data /x ` + sampleTag + `"` + k + `}`, nil},
		{"bad count", `{"eventMessage":"Sandbox: a(1) deny(one) file-read-data /x ` + sampleTag + `"` + k + `}`, nil},
		{"bad operation", `{"eventMessage":"Sandbox: a(1) deny(1) FILE_READ /x ` + sampleTag + `"` + k + `}`, nil},
		{"user process", `{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /x ` + sampleTag + `","processID":5}`, nil},
		{"sandboxd report", `{"eventMessage":"Sandbox: a(9) deny(1) file-read-data /x ` + sampleTag + `","subsystem":"com.apple.sandbox.reporting","processImagePath":"/usr/libexec/sandboxd","processID":412}`,
			&Denial{Process: "a", PID: 9, Operation: "file-read-data", Target: "/x"}},
		{"forged report: subsystem from another process", `{"eventMessage":"Sandbox: a(9) deny(1) file-read-data /x ` + sampleTag + `","subsystem":"com.apple.sandbox.reporting","processImagePath":"/tmp/sandboxd","processID":413}`, nil},
		{"no pid field, no sender", `{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /x ` + sampleTag + `"}`, nil},
		{"message not a string", `{"eventMessage":42` + k + `}`, nil},
		{"not json", `Filtering the log data using "eventMessage CONTAINS \"` + sampleTag + `\""`, nil},
		{"empty", ``, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := ParseLine([]byte(tc.line), sampleTag)
			if tc.want == nil {
				if ok {
					t.Fatalf("parsed %+v from a line that is no denial of this run", d)
				}
				return
			}
			if !ok || !reflect.DeepEqual(d, *tc.want) {
				t.Fatalf("got %+v, %v; want %+v", d, ok, *tc.want)
			}
		})
	}
	if _, ok := ParseLine([]byte(`{"eventMessage":"Sandbox: a(1) deny(1) x /y "`+k+`}`), ""); ok {
		t.Errorf("an empty tag matched")
	}
}

func TestReadDenialsLongLinesAndErrors(t *testing.T) {
	const k = `,"processID":0,"senderImagePath":"/System/Library/Extensions/Sandbox.kext/Contents/MacOS/Sandbox"`
	good := `{"eventMessage":"Sandbox: a(1) deny(1) file-read-data /x ` + sampleTag + `"` + k + `}`
	long := `{"eventMessage":"Sandbox: a(2) deny(1) file-read-data /` + strings.Repeat("y", 2<<20) + ` ` + sampleTag + `"` + k + `}`
	in := good + "\n" + long + "\n" + good // no final newline
	var n int
	if err := ReadDenials(strings.NewReader(in), sampleTag, func(d Denial) {
		if d.PID != 1 {
			t.Errorf("a line over the limit was parsed: pid %d", d.PID)
		}
		n++
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("got %d denials, want 2", n)
	}
	boom := errors.New("boom")
	err := ReadDenials(iotest.ErrReader(boom), sampleTag, func(Denial) {})
	if !errors.Is(err, boom) {
		t.Errorf("ReadDenials: %v, want wrapping %v", err, boom)
	}
}

func TestLogStreamArgs(t *testing.T) {
	args, err := LogStreamArgs(sampleTag)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"stream", "--style", "ndjson", "--info", "--predicate", `eventMessage CONTAINS "` + sampleTag +
		`" AND ((processID == 0 AND senderImagePath ENDSWITH "/Sandbox") OR (subsystem == "com.apple.sandbox.reporting" AND processImagePath == "/usr/libexec/sandboxd"))`}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("got %q", args)
	}
	for _, bad := range []string{"", "short", `abcdefgh" OR 1 == 1 OR "`, strings.Repeat("a", 65)} {
		if _, err := LogStreamArgs(bad); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("LogStreamArgs(%q): %v", bad, err)
		}
	}
}

// FuzzParseLine: never panics, and whatever it returns came from a line
// that ends with the tag.
func FuzzParseLine(f *testing.F) {
	b, err := os.ReadFile("testdata/constructed-log-stream.ndjson")
	if err != nil {
		f.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line string) {
		d, ok := ParseLine([]byte(line), sampleTag)
		if ok && (d.Operation == "" || d.Process == "" || d.PID < 0 || !strings.Contains(line, sampleTag)) {
			t.Fatalf("parsed %+v from %q", d, line)
		}
	})
}
