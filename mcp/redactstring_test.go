package mcp

import (
	"strings"
	"testing"
)

// Obviously fake values in the known formats (AWS's are its documented
// examples).
const (
	fakeGitHub    = "ghp_EXAMPLEexampleEXAMPLEexample0000"
	fakeJWT       = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJmYWtlIn0.ZmFrZXNpZ25hdHVyZQ"
	fakeAWSKeyID  = "AKIAIOSFODNN7EXAMPLE"
	fakeAWSSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	fakePEM       = "-----BEGIN RSA PRIVATE KEY-----\nFAKEFAKEFAKE\n-----END RSA PRIVATE KEY-----"
)

// TestRedactInString: each known token format, alone and inside a longer
// string; secrets as object keys; tokens in URLs; and ordinary words,
// paths and URLs that must survive.
func TestRedactInString(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		n              int
	}{
		{"github ghp in a command", `{"cmd":"git clone https://x.test/r && export T=` + fakeGitHub + `"}`, `{"cmd":"git clone https://x.test/r \u0026\u0026 export T=[redacted]"}`, 1},
		{"github gho ghu ghs ghr", `["a gho_EXAMPLEexampleEXAMPLE0000 b", "ghu_EXAMPLEexampleEXAMPLE0000 c", "x ghs_EXAMPLEexampleEXAMPLE0000", "y ghr_EXAMPLEexampleEXAMPLE0000"]`,
			`["a [redacted] b","[redacted] c","x [redacted]","y [redacted]"]`, 4},
		{"github fine-grained", `{"m":"use github_pat_11FAKE0000000000_exampleEXAMPLE here"}`, `{"m":"use [redacted] here"}`, 1},
		{"openai sk- and sk-proj-", `{"m":"keys sk-FAKEexampleEXAMPLE00000000 and sk-proj-FAKEexample_EXAMPLE-0000000"}`, `{"m":"keys [redacted] and [redacted]"}`, 2},
		{"anthropic", `{"m":"ANTHROPIC sk-ant-api03-FAKEexampleEXAMPLE0000-fake used"}`, `{"m":"ANTHROPIC [redacted] used"}`, 1},
		{"aws key id", `{"m":"id ` + fakeAWSKeyID + ` ok"}`, `{"m":"id [redacted] ok"}`, 1},
		{"aws secret after its name", `{"cmd":"AWS_SECRET_ACCESS_KEY=` + fakeAWSSecret + ` ./deploy.sh"}`, `{"cmd":"AWS_SECRET_ACCESS_KEY=[redacted] ./deploy.sh"}`, 1},
		{"slack xoxb xoxp xapp", `{"m":"xoxb-0000-fake-example x xoxp-0000-fake-example y xapp-1-FAKE-0000-example"}`, `{"m":"[redacted] x [redacted] y [redacted]"}`, 3},
		{"google", `{"m":"key AIzaFAKEexampleEXAMPLE00000000000fake0 end"}`, `{"m":"key [redacted] end"}`, 1},
		{"jwt in a header", `{"cmd":"curl -H 'X-Session-Data: ` + fakeJWT + `' https://api.test/"}`, `{"cmd":"curl -H 'X-Session-Data: [redacted]' https://api.test/"}`, 1},
		{"bearer in a command", `{"cmd":"curl -H 'Authorization: Bearer fake0token0value' https://api.test/v1"}`, `{"cmd":"curl -H 'Authorization: Bearer [redacted]' https://api.test/v1"}`, 1},
		{"basic credential", `{"cmd":"curl -H \"Authorization: Basic ZmFrZTpmYWtl\" x"}`, `{"cmd":"curl -H \"Authorization: Basic [redacted]\" x"}`, 1},
		{"pem block in text", `{"m":"here: ` + strings.ReplaceAll(fakePEM, "\n", `\n`) + ` done"}`, `{"m":"here: [redacted] done"}`, 1},
		{"--password=", `{"cmd":"mysql --user=root --password=hunter2 db"}`, `{"cmd":"mysql --user=root --password=[redacted] db"}`, 1},
		{"--token VALUE", `{"cmd":"tool --token fakevalue --verbose"}`, `{"cmd":"tool --token [redacted] --verbose"}`, 1},
		{"password: in yaml", `{"cfg":"user: ada\npassword: hunter2\n"}`, `{"cfg":"user: ada\npassword: [redacted]\n"}`, 1},
		{"url user and password", `{"m":"pull from https://ada:hunter2@git.test/r.git now"}`, `{"m":"pull from https://[redacted]@git.test/r.git now"}`, 1},
		{"token as url user", `{"u":"https://` + fakeGitHub + `@github.test/o/r"}`, `{"u":"https://[redacted]@github.test/o/r"}`, 1},
		{"url query token", `{"u":"https://api.test/x?access_token=fakevalue&page=2"}`, `{"u":"https://api.test/x?access_token=[redacted]\u0026page=2"}`, 1},
		{"url query high-entropy value", `{"u":"https://api.test/x?sig=Zm9vYmFyMTIzNDU2Nzg5MGFiY2RlZmdo&q=golang"}`, `{"u":"https://api.test/x?sig=[redacted]\u0026q=golang"}`, 1},
		{"secret as an object key", `{"` + fakeGitHub + `":"ada","name":"x"}`, `{"[redacted]":"ada","name":"x"}`, 1},
		{"two secret keys", `{"` + fakeGitHub + `":1,"` + fakeAWSKeyID + `":2}`, ``, 2},
		{"jwt as a key", `{"by":{"` + fakeJWT + `":true}}`, `{"by":{"[redacted]":true}}`, 1},
		// False positives to avoid.
		{"prose with secret words", `{"m":"the password policy is documented; ask for a token budget"}`, `{"m":"the password policy is documented; ask for a token budget"}`, 0},
		{"basic words", `{"m":"Basic understanding of bearer bonds"}`, `{"m":"Basic understanding of bearer bonds"}`, 0},
		{"paths", `{"p":"/home/ada/src/task-runner/skills/sk-learn.md","q":"./deploy.sh --dry-run --verbose"}`, `{"p":"/home/ada/src/task-runner/skills/sk-learn.md","q":"./deploy.sh --dry-run --verbose"}`, 0},
		{"ordinary url", `{"u":"https://example.com/search?q=golang&page=2#top"}`, `{"u":"https://example.com/search?q=golang\u0026page=2#top"}`, 0},
		{"ordinary assignment", `{"cmd":"GOOS=linux GOARCH=amd64 go build ./..."}`, `{"cmd":"GOOS=linux GOARCH=amd64 go build ./..."}`, 0},
		{"git sha in a message", `{"m":"revert 3f786850e387550fdab836ed7e6dc881de23001b please"}`, `{"m":"revert 3f786850e387550fdab836ed7e6dc881de23001b please"}`, 0},
	} {
		got, n, err := redact([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if (tc.want != "" && string(got) != tc.want) || n != tc.n {
			t.Errorf("%s: redact(%s) = %s (%d), want %s (%d)", tc.name, tc.in, got, n, tc.want, tc.n)
		}
		for _, fake := range []string{fakeGitHub, fakeJWT, fakeAWSKeyID, fakeAWSSecret, "hunter2", "FAKEFAKE", "fakevalue", "fake0token"} {
			if strings.Contains(string(got), fake) {
				t.Errorf("%s: %q survived: %s", tc.name, fake, got)
			}
		}
	}
}

// TestAuditURI: a URI's user, password, query and fragment values are
// redacted; its scheme, host, path and parameter names stay.
func TestAuditURI(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"demo://resource/static/document/architecture.md", "demo://resource/static/document/architecture.md"},
		{"https://ada:hunter2@db.test/x?user=ada&key=fakevalue#frag", "https://[redacted]@db.test/x?user=[redacted]&key=[redacted]#frag"},
		{"https://api.test/cb#access_token=fakevalue&state=1", "https://api.test/cb#access_token=[redacted]&state=[redacted]"},
		{"demo://h/x?flag", "demo://h/x?flag"},
		{"file:///srv/" + fakeGitHub + "/x", "file:///srv/[redacted]/x"},
		{"demo://h/a?b#c?d=e", "demo://h/a?b#c?d=[redacted]"},
		{"demo://ada:hunter2/x", "demo://ada:[redacted]/x"},
		{"http://h:8080/x", "http://h:8080/x"},
	} {
		if got := auditURI(tc.in); got != tc.want {
			t.Errorf("auditURI(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCallStartBeforeForward: when the server reads a tools/call, the
// audit already holds its mcp_call_start (tool, call id, redacted
// arguments) and no mcp_call; the mcp_call that follows the answer has the
// same call id. A refused call has no start record (it never reached the
// server), nor has any other request.
func TestCallStartBeforeForward(t *testing.T) {
	s := newRawOpts(t, Options{Rules: Rules{Deny: []string{"hidden"}}, AuditArgs: true, MaxMessage: 1 << 20})
	s.client(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"hidden"}}`)
	s.atClient()
	s.client(`{"jsonrpc":"2.0","id":"p","method":"prompts/get","params":{"name":"p"}}`)
	s.atServer()
	s.answer(`{"messages":[]}`)
	s.atClient()
	s.client(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"slow","arguments":{"token":"` + fakeGitHub + `"}}}`)
	s.atServer()
	var start *Record
	for _, r := range s.audit.allRecords(t) {
		switch {
		case r.Event == "mcp_call_start" && start == nil:
			start = &r
		case r.Event == "mcp_call_start":
			t.Errorf("a second start record: %+v", r)
		case r.Event == "mcp_call" && r.Tool == "slow":
			t.Errorf("an end record before the call ended: %+v", r)
		}
	}
	if start == nil || start.Tool != "slow" || start.CallID == 0 || string(start.Args) != `{"token":"[redacted]"}` {
		t.Fatalf("start record %+v", start)
	}
	s.answer(`{"content":[]}`)
	s.atClient()
	recs := s.audit.records(t)
	if end := recs[len(recs)-1]; end.Event != "mcp_call" || end.CallID != start.CallID || end.Outcome != outcomeOK {
		t.Errorf("end record %+v, start %+v", end, start)
	}
}
