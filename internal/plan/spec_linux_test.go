package plan

// What a run adds to the layout in the shapes' fixtures: the first
// descriptor of the binds (bwrap's fdBinds) and the inside paths of the
// later binds (the proxies' sockets, the git hint). They are inputs of
// the fixtures, not of the plan: the mechanisms' tests check their own
// values against them (TestFixturesMatchBwrap in internal/mechanism/bwrap).
const (
	fdBinds      = 9
	egressInside = "/run/sandbox-run/egress.sock"
	llmInside    = "/run/sandbox-run/llm.sock"
	gitHintDir   = "/.sandbox-run/bin"
)
