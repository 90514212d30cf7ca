// Package proxy is sandbox-run's egress proxy: the only way a sandboxed
// command's network traffic leaves the sandbox. It serves HTTP proxy
// requests (absolute-form GET, POST, ...) and CONNECT tunnels, on the
// standard library's HTTP server and transport alone, and decides each one
// by the exact IP address it would connect to. The allow-list's syntax, the address classes below
// and how a client's host:port is read are the allowlist package's, which
// policy validates with too: an entry the policy accepts is one the proxy
// reads the same way.
//
// # Guarantees
//
//   - Every request is decided before any connection is opened: the target
//     is parsed, checked against the allow list, resolved once (host names)
//     and every answer is checked against the refused ranges. If any answer
//     is refused, the request is refused. The dialer then connects only to
//     the checked IP literals, and its Control hook checks the address again
//     just before connect(2).
//   - Never reachable, whatever the allow list says: 0.0.0.0/8, 127.0.0.0/8,
//     169.254.0.0/16 (including 169.254.169.254), 224.0.0.0/4, 240.0.0.0/4,
//     255.255.255.255, ::, ::1, fe80::/10, ff00::/8, fd00:ec2::254 and
//     168.63.129.16. IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible
//     (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses are
//     judged by the IPv4 address they carry.
//   - Reachable only when an address or CIDR allow-list entry names the
//     address or its range (a host name entry is not enough): 10.0.0.0/8,
//     172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10, 198.18.0.0/15, fc00::/7.
//   - The proxy host itself is never reached through an address of its own
//     interfaces (every family; its LAN, bridge, VPN and veth addresses,
//     public or private), as they are at every decision and at the dial's
//     re-check, so an address added a moment ago counts (on Linux, while
//     Serve or Transparent serves, the list is kept and listed anew only after a netlink
//     address or link event, which the kernel queues before the change's
//     system call returns; elsewhere it is listed at every call): such an address
//     is refused (code own-address) even when a range or a host name entry
//     covers it. Only an entry naming that exact address (10.1.2.3,
//     10.1.2.3:8080, 10.1.2.3/32) opens it. When the interfaces cannot be
//     listed, every address is refused.
//   - Every spelling of an IPv4 address that inet_aton(3) accepts (2130706433,
//     0177.0.0.1, 0x7f.1, 127.1), bracketed IPv6 forms and names with a
//     trailing dot are judged as the address or name they denote; a host
//     whose last label is numeric but does not parse is refused. Host names
//     never reach the operating system's dialer: only checked IP literals do.
//   - A refusal is an HTTP response (403 for policy, 502 when a name does not
//     resolve) with the header X-Sandbox-Refusal set to a reason code and a
//     body that names the rule and how to allow the target. Codes:
//     not-allowed, private, own-address, loopback, unspecified, link-local,
//     metadata, multicast, reserved, broadcast, bad-host, bad-scheme,
//     dns-failure, dial-refused.
//   - Redirects are never followed: the client receives the 3xx, and the
//     request it makes next is decided like any other.
//   - The host's HTTP_PROXY, HTTPS_PROXY and NO_PROXY are ignored: the
//     transport has no Proxy function and a CONNECT dials the checked
//     address itself.
//   - Every decision is written to Config.Audit as one JSON line.
//   - A client connection that has not sent a whole request header within
//     Config.ReadHeaderTimeout (default 10 s) of being accepted is closed
//     without a reply, however slowly it trickles bytes; so is a kept-alive
//     connection whose next request does not start within
//     Config.IdleTimeout (default 2 min). Each connection is served on its
//     own, so connections that send nothing do not delay other clients'
//     requests. A request header larger than about 64 KiB is answered with
//     431 and the connection closed.
//
// # Non-guarantees
//
//   - The proxy does not inspect TLS or tunnel content: an allowed CONNECT
//     carries whatever protocol the client speaks, to the allowed address.
//   - Only TCP is proxied. UDP (including QUIC and DNS) is not.
//   - Names are resolved by the proxy host's resolver (or Config.Resolver);
//     the proxy trusts its answers only as far as the range table allows.
//   - Data that an allowed host relays onward (an open proxy, a redirector
//     that fetches server-side) is outside the proxy's view.
//   - "Own" means the interfaces of the proxy's network namespace. An
//     address the host answers on without holding it on an interface (a
//     local route such as ip route add local 10.9.0.0/16 dev lo, AnyIP) is
//     not recognised, nor is a service in another network namespace of the
//     same machine; those are judged by the range table like any address.
//   - Teredo (2001::/32) and other tunnelling forms whose IPv4 address is
//     obfuscated are treated as ordinary IPv6 addresses.
//   - A failed write to the audit log is logged, not fatal: the decision
//     stands.
//   - Once a request's header has been read, its body, its response and a
//     CONNECT tunnel have no time limit: a client that uploads slowly, stops
//     reading a response or leaves a tunnel idle keeps its connection (and
//     the upstream one) until either side closes it or Serve returns. A
//     limit there would cut long downloads and long-lived tunnels.
//   - The number of client connections is not capped. A cap shared by all
//     clients would let one client that fills it lock the others out;
//     instead each connection costs a goroutine and a file descriptor until
//     it ends or the timeouts above reclaim it, and the process's
//     RLIMIT_NOFILE is the bound. When descriptors run out the proxy keeps
//     serving: it retries accepting, and its dials fail (502) until
//     descriptors are free again.
package proxy
