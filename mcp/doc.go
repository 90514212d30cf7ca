// Package mcp is an MCP-aware relay in front of a sandboxed stdio tool
// server: the client (a harness) speaks MCP to the relay, the relay starts
// the server with sandbox.Run and passes messages both ways, deciding which
// tools the client may see and call and recording every call.
//
// The relay works on JSON-RPC messages, not on MCP features: it parses
// every message (with mcp-go's types for ids and errors), acts on
// tools/list, tools/call and notifications/cancelled, and forwards every
// other message byte for byte. Resources, prompts, sampling, elicitation,
// roots, logging, progress, completion, tasks and pagination therefore
// pass through unchanged, for the initialize handshake (protocol versions
// up to 2025-11-25) and for the stateless server/discover style
// (2026-07-28) alike.
//
// # Guarantees
//
//   - A tools/call naming a tool the Rules hide never reaches the server:
//     the client gets a JSON-RPC error (-32602) naming the rule, and the
//     audit records the refusal. This holds whatever the server advertises.
//   - tools/list results, page by page, list only visible tools; every
//     other member of the result (nextCursor, _meta, ttl) is kept.
//   - A message that JSON parsers could read two ways (a key repeated, or
//     keys differing only in case, which encoding/json folds together and
//     JSON.parse does not) is refused from the client and dropped from the
//     server, so the relay and the two ends never disagree on a method, an
//     id or a tool name. A JSON-RPC batch from the client is split into its
//     members, each judged alone.
//   - A server response is delivered only for a request the client sent
//     and has not seen answered or cancelled; anything else from the server
//     that is not a valid JSON-RPC message is dropped and logged.
//   - When the server ends, every pending request gets a JSON-RPC error
//     (-32603) saying why, and Serve returns an error wrapping
//     ErrServerEnded.
//   - Memory is bounded: one message per direction (at most MaxMessage
//     bytes) plus one record per pending request. A server that floods
//     its output is slowed down by the pipe to the client, not buffered.
//   - The server's stderr goes to Options.Sandbox.Stderr as it is.
//
// # Non-guarantees
//
//   - Visibility is by name. A visible tool can do whatever its server
//     implements; the sandbox, not the relay, bounds what the server can
//     reach. Resource reads, prompts and completions are not filtered.
//   - The audit records what the client asked and how the call ended; it
//     cannot say what the server did. Argument values are recorded only
//     with AuditArgs.
//   - Batches are answered message by message, not as one batch response.
//   - The relay does not answer server-to-client requests itself (sampling,
//     elicitation, roots): the client does, through the relay.
package mcp
