// Package mcp is an MCP-aware relay in front of a sandboxed stdio tool
// server: the client (a harness) speaks MCP to the relay, the relay starts
// the server with sandbox.Run and passes messages both ways, deciding which
// tools the client may see and call and recording every call.
//
// The relay works on JSON-RPC messages, not on MCP features: it parses
// every message, judges the requests that name a tool, prompt or resource
// (tools/call, prompts/get, resources/read, resources/subscribe,
// resources/unsubscribe, completion/complete), filters the lists of them,
// gates the server's sampling, elicitation and roots requests, and
// forwards every other message, each in the relay's own encoding. This holds for
// the initialize handshake (protocol versions up to 2025-11-25) and for
// the stateless server/discover style (2026-07-28) alike.
//
// Serve relays one client on a pair of streams (stdio); ServeHTTP serves
// MCP's Streamable HTTP transport, each client session with its own Serve
// and sandbox (see its doc for what it adds and does not hold: among it,
// admission that clients without the token cannot starve, and sessions
// abandoned at --max-sessions ended for new ones).
//
// # Guarantees
//
//   - A request using a tool, prompt or resource the Rules hide never
//     reaches the server: the client gets a JSON-RPC error (-32602) naming
//     the rule, and the audit records the refusal. So does a request whose
//     name or URI is missing or not a string, whatever the rules. This
//     holds whatever the server advertises.
//   - Resource URIs are judged as servers read them: in canonical form
//     (CanonicalURI: what the WHATWG URL parser, which the TypeScript
//     SDK's lookup uses, makes of the URI, with RFC 3986's equivalences)
//     and as a server that percent-decodes them reads them; the resource
//     is visible only when both are. The server is sent the canonical form,
//     so it reads what was judged. Resource patterns are canonicalised the
//     same way. When any rule judges resources, a URI without a canonical
//     form is refused.
//   - List results, page by page, list only visible entries; every other
//     member of the result (nextCursor, _meta, ttl) is kept.
//   - What is judged is what is forwarded: no byte read from one side is
//     written to the other. Every message is written as the relay's own
//     encoding of what it parsed: the envelope members it knows (jsonrpc,
//     id, method, params, result, error; others are dropped), compact,
//     every string from its decoded value (invalid UTF-8 and lone
//     surrogates as U+FFFD), numbers as written.
//   - A message that JSON parsers could read two ways is refused from the
//     client (-32600, the reason, audited) and never reaches the client
//     from the server (a request with a readable id is refused, a list
//     result withheld, anything else dropped; all audited): a key repeated
//     or differing only in case from another (encoding/json folds them
//     together, JSON.parse does not), or a member name differing from one
//     the relay reads at that level only in case or in control, format or
//     space characters ("ID", "Method", "name\u0000": encoding/json in
//     mcp-go and the Go SDK before v1.3.1 matches names regardless of
//     case, and segmentio/encoding in the Go SDK since drops trailing
//     NULs). A JSON-RPC batch from the client is split into its members,
//     each judged alone.
//   - Only methods under notifications/ go without an id: any other
//     method without one is refused and audited, both ways.
//   - Ids: a client request's id must be a string or an integer (null is
//     refused); ids are compared by their exact value, and one already
//     pending is refused. The server sees the relay's own ids and answers
//     reach the client under its id as written, so the server cannot
//     confuse two requests, and an answer to an id the relay did not issue
//     is dropped. A response with both result and error reaches the client
//     as an error.
//   - Server requests needing a client capability (sampling/createMessage,
//     elicitation/create, roots/list) reach the client only when it
//     declared it and DenyServerRequests does not name them; a client
//     answer to no server request is dropped.
//   - When the server ends, every pending request gets a JSON-RPC error
//     (-32603) saying why, and Serve returns an error wrapping
//     ErrServerEnded. When the relay gives up on the session (a server line
//     over MaxMessage or one that never ends, a client line over it whose
//     id cannot be read), the sandbox is ended at once and Serve returns an
//     error wrapping ErrSessionEnded; the mcp_end record says why.
//   - Memory is bounded: one message per direction (at most MaxMessage
//     bytes) plus one record per pending request (at most MaxPending each
//     way, each holding at most AuditArgsMax argument bytes). A server that
//     floods its output is slowed down by the pipe to the client, not
//     buffered. No audit line is longer than AuditLineMax.
//   - Every request either way is audited with its method, name or URI,
//     size, outcome and duration. A tools/call the relay forwards is
//     recorded twice: mcp_call_start, handed to the audit writer in one
//     Write before the server is sent the call (with --audit, the file
//     itself: a relay killed by SIGKILL leaves it), and mcp_call when it
//     ends. URIs are recorded without their user, password, query and
//     fragment values, whatever AuditArgs says.
//   - With Options.Pins, what a client is shown is what was pinned: an
//     initialize result whose instructions or serverInfo differ is
//     withheld (the client gets -32603 naming what changed); a tool,
//     prompt, resource template or resource whose listed entry differs in
//     any member (_meta, annotations, title, icons, schemas included), or
//     that the pins do not name, is hidden, and requests naming such a
//     tool or prompt, or such a listed resource, are refused; each is
//     audited with the members that changed. Pin files are versioned
//     (ParsePins reads versions 1 and 2); DiffPins and Snapshot let a
//     caller review a pin before trusting it.
//   - The server's stderr goes to Options.Sandbox.Stderr as it is.
//
// # Non-guarantees
//
//   - Visibility is by name. A visible tool can do whatever its server
//     implements; the sandbox, not the relay, bounds what the server can
//     reach. Definitions pass as sent unless Pins hide them; without Pins,
//     a definition that changes within the session is only flagged. A pin
//     recorded by a first session (PinRecord) trusts what that session
//     saw. Pins hold what is listed, not what is read: the content of a
//     resource (an MCP App's ui:// page) or a prompt is not pinned, and a
//     URI no list names is judged by the Rules alone.
//   - The audit records what the client asked and how the request ended; it
//     cannot say what the server did. Argument values are recorded only
//     with AuditArgs, redacted by a heuristic unless AuditArgsRaw. The
//     start record is written, not fsynced: a crash of the host can lose
//     it.
//   - A resource URI that differs from a visible one only in ways neither
//     reading covers (a case-insensitive file system's path case, a
//     server's own aliases) is judged as a different resource.
//   - Batches are answered message by message, not as one batch response.
//   - The relay does not answer server-to-client requests itself: the
//     client does, through the relay, or the relay refuses them.
package mcp
