// Package llm is the run's LLM channel: the relay that carries the
// command's requests to the node's LLM proxy (Serve, behind the loopback
// port or socket the sandbox sees), and the metering of provider requests
// that the egress proxy terminates (Hosts, WithMeter).
//
// It puts the provider key (--llm-key-env) into a request outside the
// sandbox and audits each request by method, path, status, model and
// token counts; it never records a header, a query, a key or a prompt.
// It judges no destination: the relay goes only to the one socket it is
// given, and the egress proxy judges what WithMeter wraps.
package llm
