// Package httprule reads and applies --allow-http rules: which methods may
// be sent to which paths of one host, judged on requests the egress proxy
// sees in clear (TLS it terminated, or plain HTTP).
//
// A rule is "METHODS HOST[:PORT]/PATH-GLOB":
//
//   - METHODS is "*" or a comma list of HTTP methods (GET,HEAD); they are
//     matched case-sensitively after upper-casing the rule.
//   - HOST is a host name or an IP literal (IPv6 in brackets), read as the
//     allowlist package reads a client's target; PORT defaults to 443.
//     There are no wildcards in hosts: a rule names one host.
//   - PATH-GLOB is an absolute path whose segments are literal, "*" (exactly
//     one segment, or any run of characters within a segment when mixed
//     with text: "*.json") or "**" (any number of segments, zero included).
//     A rule without a path means "/**".
//
// # Guarantees
//
//   - Paths are judged in one canonical form (Normalize): percent-decoded,
//     duplicate slashes collapsed, "." and ".." segments resolved (".."
//     never climbs above the root). A path that would decode to a different
//     structure than it shows, an encoded slash (%2F), an encoded or
//     literal backslash, an encoded NUL or a bad escape, is refused, never
//     decoded: a server could read it either way. The caller forwards the
//     canonical form, so what a rule judged is what the upstream receives.
//   - A host with at least one rule gets only the requests some rule
//     matches (Set.Judge); a host without rules is not judged here at all.
//   - A refusal names a rule that would allow the request (Suggest).
//
// # Non-guarantees
//
//   - The query string, headers and body are not judged.
//   - A trailing slash is ignored when matching ("/a/" matches "/a"); it
//     is forwarded as sent.
package httprule
