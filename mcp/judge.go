package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// refusal is why a request does not reach the other side.
type refusal struct {
	code int
	msg  string
	rule string // for the audit
	data any
}

// target is where a method names the thing the rules judge.
type target struct {
	kind   string
	member string // in params
}

// targets are the client requests that name a tool, prompt or resource.
// completion/complete names one inside params.ref (see judgeRef).
var targets = map[string]target{
	methodToolsCall:            {KindTool, "name"},
	methodPromptsGet:           {KindPrompt, "name"},
	methodResourcesRead:        {KindResource, "uri"},
	methodResourcesSubscribe:   {KindResource, "uri"},
	methodResourcesUnsubscribe: {KindResource, "uri"},
}

// judge reads what a client request names and decides, by the rules,
// whether it may reach the server. The call record is returned in both
// cases, for the audit. A request that names its target other than with a
// string (missing, null, a number, a list, an object) is refused: a server
// may look it up some other way than the relay would.
func (r *relay) judge(e envelope) (*call, *refusal) {
	c := &call{clientID: bytes.Clone(e.id), clientKey: e.idKey, method: e.method, start: time.Now(),
		paramBytes: len(e.obj["params"])}
	t, named := targets[e.method]
	if !named && e.method != methodComplete && e.method != methodInitialize {
		// Still read the capabilities a 2026-07-28 request declares.
		if p, err := e.params(); err == nil {
			c.caps = metaCaps(p)
		}
		return c, nil
	}
	p, err := e.params()
	if err != nil {
		return c, &refusal{code: codeInvalidParams, rule: "malformed: params is not an object",
			msg: fmt.Sprintf("sandbox-run: %s params: %v", e.method, err)}
	}
	c.caps = metaCaps(p)
	switch e.method {
	case methodInitialize:
		r.mu.Lock()
		r.caps = r.caps.or(capsOf(p["capabilities"]))
		r.mu.Unlock()
		return c, nil
	case methodComplete:
		ref, err := parseObject(p["ref"])
		if err != nil {
			return c, &refusal{code: codeInvalidParams, rule: "malformed: params.ref is not an object",
				msg: "sandbox-run: completion/complete: params.ref is not an object"}
		}
		if miss := refMembers.check(ref); miss != nil {
			return c, &refusal{code: codeInvalidRequest, rule: "malformed: params.ref: " + miss.Error(),
				msg: "sandbox-run: completion/complete: params.ref: " + miss.Error()}
		}
		switch ref.str("type") {
		case "ref/prompt":
			t, p = target{KindPrompt, "name"}, ref
		case "ref/resource":
			t, p = target{KindResource, "uri"}, ref
		default:
			c.nameSent = capString(string(ref["type"]))
			return c, &refusal{code: codeInvalidParams, rule: "malformed: params.ref.type is not ref/prompt or ref/resource",
				msg: "sandbox-run: completion/complete: params.ref.type must be \"ref/prompt\" or \"ref/resource\""}
		}
	}
	c.kind = t.kind
	if e.method == methodToolsCall {
		// Kept for refused calls too: the audit says what was asked.
		r.keepArgs(c, p["arguments"])
	}
	return c, r.judgeName(c, p, t)
}

// judgeName checks params[t.member] is a string and visible.
func (r *relay) judgeName(c *call, p object, t target) *refusal {
	raw, ok := p[t.member]
	var name string
	if !ok || len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &name) != nil {
		what := "missing"
		if ok {
			what = "not a string"
			c.nameSent = capString(string(raw))
		}
		return &refusal{code: codeInvalidParams, rule: fmt.Sprintf("malformed: %s is %s", t.member, what),
			msg:  fmt.Sprintf("sandbox-run: %s: params.%s is %s; refused", c.method, t.member, what),
			data: map[string]string{"method": c.method}}
	}
	c.name = name
	var rule string
	if t.kind == KindResource {
		ok, rule = r.judgeResource(c, raw, name)
	} else {
		ok, rule = r.rules.CheckKind(t.kind, name)
	}
	if ok {
		r.mu.Lock()
		why := r.pinRefusal(t.kind, name)
		r.mu.Unlock()
		if why != "" {
			ok, rule = false, "--pin: "+why
		}
	}
	if ok {
		return nil
	}
	shown := capString(name)
	if t.kind == KindResource {
		shown = capString(auditURI(name))
	}
	return &refusal{code: codeRefused, rule: rule,
		msg:  fmt.Sprintf("sandbox-run: %s %q is not available: refused by %s", t.kind, shown, rule),
		data: map[string]string{t.kind: shown, "rule": rule}}
}

// keepArgs records the arguments' size and, when the audit records
// values, the arguments themselves: redacted unless raw, and only when
// they fit the cap (a cut JSON value could end inside a secret).
func (r *relay) keepArgs(c *call, args json.RawMessage) {
	c.argBytes = len(args)
	if r.auditArgs.mode == argsOff || len(args) == 0 {
		return
	}
	if len(args) > r.auditArgs.max {
		c.argsNote = fmt.Sprintf("over %d bytes (--audit-args-max)", r.auditArgs.max)
		return
	}
	if r.auditArgs.mode == argsRaw {
		c.args = bytes.Clone(args)
		return
	}
	red, n, err := redact(args)
	if err != nil {
		c.argsNote = "not valid JSON"
		return
	}
	c.args, c.redacted = red, n
}

// serverNotification passes a notification from the server to the
// client, but not one about a resource the rules hide (its URI alone tells
// what the rules hide). A notifications/cancelled ends the server request
// it names. A subscription id in _meta (protocol 2026-07-28: the id of the
// client's subscriptions/listen request) is turned back into the client's
// id; one naming no pending request is dropped.
func (r *relay) serverNotification(e envelope) error {
	p, err := e.params()
	if err != nil {
		r.log.Warn("dropped a server notification whose params are not an object", "method", capString(e.method))
		return nil
	}
	switch e.method {
	case notificationResourceUpdated:
		if _, ok, _ := r.rules.checkURI(p.str("uri")); !ok {
			return nil
		}
	case notificationCancelled:
		if key, err := idKey(p["requestId"]); err == nil {
			r.mu.Lock()
			sc := r.fromSrv[key]
			delete(r.fromSrv, key)
			r.mu.Unlock()
			if sc != nil {
				r.audit.serverRequest(sc, outcomeCancelled, 0, "")
			}
		}
	}
	meta, err := walkObject(p["_meta"])
	sub, has := meta[metaSubscriptionID]
	if err != nil || !has {
		return r.sendClient(e.out())
	}
	key, _ := idKey(sub)
	id, ok := relayID(key)
	r.mu.Lock()
	c := r.pending[id]
	r.mu.Unlock()
	if !ok || c == nil {
		r.log.Warn("dropped a server notification for no pending subscription", "method", capString(e.method))
		return nil
	}
	m := e.out()
	m.params = splice(m.params, sub, c.clientID)
	return r.sendClient(m)
}

// clientCaps are the client capabilities that let a server ask it
// something.
type clientCaps struct{ sampling, elicitation, roots bool }

func (a clientCaps) or(b clientCaps) clientCaps {
	return clientCaps{a.sampling || b.sampling, a.elicitation || b.elicitation, a.roots || b.roots}
}

// capsOf reads a ClientCapabilities object: a capability is declared when
// its member is present and not null.
func capsOf(raw json.RawMessage) clientCaps {
	o, err := parseObject(raw)
	if err != nil {
		return clientCaps{}
	}
	set := func(k string) bool { v, ok := o[k]; return ok && string(v) != "null" }
	return clientCaps{sampling: set("sampling"), elicitation: set("elicitation"), roots: set("roots")}
}

// metaCaps reads the capabilities a 2026-07-28 request declares for
// itself in params._meta.
func metaCaps(p object) clientCaps {
	meta, err := parseObject(p["_meta"])
	if err != nil {
		return clientCaps{}
	}
	return capsOf(meta[metaClientCapabilities])
}

// serverRequests maps the server-to-client requests a client must declare
// a capability for to that capability.
var serverRequests = map[string]string{
	methodSamplingCreateMessage: "sampling",
	methodElicitationCreate:     "elicitation",
	methodListRoots:             "roots",
}

// ServerRequestMethods are the methods Options.DenyServerRequests may name.
func ServerRequestMethods() []string {
	return []string{methodSamplingCreateMessage, methodElicitationCreate, methodListRoots}
}

// declared says whether the client declared capability cap: in
// initialize, or (2026-07-28) on a request still pending.
func (r *relay) declared(capability string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.caps
	for _, c := range r.pending {
		all = all.or(c.caps)
	}
	switch capability {
	case "sampling":
		return all.sampling
	case "elicitation":
		return all.elicitation
	case "roots":
		return all.roots
	}
	return false
}

// serverRequest passes a request from the server to the client, unless
// it needs a capability the client did not declare or a flag refuses it;
// then the server gets an error and the client never sees it.
func (r *relay) serverRequest(e envelope) error {
	sc := &srvCall{method: e.method, start: time.Now()}
	var ref *refusal
	if capability, gated := serverRequests[e.method]; gated {
		switch {
		case r.denyFromSrv[e.method]:
			ref = &refusal{code: codeMethodNotFound, rule: "--deny-server-request " + e.method,
				msg: "sandbox-run: " + e.method + " is refused by --deny-server-request"}
		case !r.declared(capability):
			ref = &refusal{code: codeMethodNotFound, rule: "the client did not declare the " + capability + " capability",
				msg: "sandbox-run: the client did not declare the " + capability + " capability; " + e.method + " refused"}
		}
	}
	if ref == nil {
		r.mu.Lock()
		switch {
		case r.fromSrv[e.idKey] != nil:
			ref = &refusal{code: codeInvalidRequest, rule: "duplicate id",
				msg: "sandbox-run: a request with this id is already pending"}
		case len(r.fromSrv) >= r.maxPending:
			ref = &refusal{code: codeBusy, rule: fmt.Sprintf("--max-pending %d", r.maxPending),
				msg: "sandbox-run: too many server requests pending"}
		default:
			r.fromSrv[e.idKey] = sc
		}
		r.mu.Unlock()
	}
	if ref != nil {
		r.audit.serverRequest(sc, outcomeRefused, ref.code, ref.rule)
		return r.writeServer(errorLine(e.id, ref.code, ref.msg, nil))
	}
	return r.sendClient(e.out())
}
