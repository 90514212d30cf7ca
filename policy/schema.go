package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// SchemaID is the $id of the profile's JSON Schema.
const SchemaID = "https://github.com/sandbox-run/sandbox-run/profile.schema.json"

// fieldDocs describes each profile field for editors. Schema refuses to
// build when a field of Policy has no line here, so that a new field
// cannot ship without its schema entry.
var fieldDocs = map[string]string{
	"workdir":             "writable directory, at the same path inside; the command's current directory (absolute)",
	"write":               "further writable directories (absolute)",
	"read":                "further read-only paths (absolute)",
	"protect":             "further protected paths: relative ones in every writable directory, absolute ones in one",
	"unprotect":           "built-in protected paths to drop (each a warning in the report)",
	"env":                 "variables for the command; nothing of the caller's environment is passed otherwise",
	"pass_env":            "variables copied from sandbox-run's environment",
	"allow_hosts":         "egress allow-list: host, *.domain, host:port, host:*, IP literal or CIDR; empty means no egress",
	"presets":             "named host sets for common registries and APIs (sandbox-run presets)",
	"allow_http":          "method and path rules, 'METHODS HOST[:PORT]/PATH-GLOB': TLS to HOST is terminated with a per-run CA and only matching requests pass (docs/tls.md)",
	"secrets":             "credentials kept outside: inside, each name holds a placeholder the proxy swaps for the real value only over TLS to the hosts it is bound to; the value comes from the caller's environment or a file, never from the profile (docs/secrets.md)",
	"llm_key_env":         "the caller's variable that holds the LLM provider's key, added outside; inside it holds a placeholder",
	"upstream_ca":         "a PEM file whose CAs, instead of the system roots, verify the hosts allow_http terminates",
	"egress_socket":       "a node-wide egress proxy's Unix socket, used instead of the built-in proxy",
	"llm_socket":          "an LLM proxy's Unix socket, forwarded to a loopback port inside (SANDBOX_LLM_URL)",
	"llm_env":             "further variables that get the LLM channel's URL",
	"ptrace":              "allow ptrace in the seccomp filter",
	"sandbox":             "the mechanism",
	"uid":                 "host uid the sandbox runs under when sandbox-run is root (default 65534)",
	"gid":                 "host gid the sandbox runs under when sandbox-run is root (default 65534)",
	"tmp_size":            "size of the private /tmp: bytes, or a string such as \"256M\"",
	"shm_size":            "size of the private /dev/shm: bytes, or a string such as \"64M\"",
	"timeout":             "end the whole sandbox after this long, e.g. \"90s\"",
	"memory":              "memory ceiling of the whole sandbox: bytes, a string such as \"512M\", or \"none\"",
	"pids":                "task ceiling of the whole sandbox",
	"cpu_time":            "CPU time limit of the whole sandbox, e.g. \"30s\"",
	"nofile":              "open-file limit per process",
	"fsize":               "largest file a process may write: bytes, or a string such as \"1G\"",
	"home":                "an existing directory that becomes $HOME, writable (absolute)",
	"session":             "a named home kept between runs of the same session",
	"caches":              "shared toolchain caches",
	"ssh_agent":           "your ssh-agent's socket, through sandbox-run's filter (--ssh-agent)",
	"ssh_known_hosts":     "a known_hosts file shown read-only with the ssh agent",
	"unix_sockets":        "host Unix sockets shown at their paths, audited (--unix-socket)",
	"unix_sockets_unsafe": "host Unix sockets handed in unfiltered (--unix-socket-unsafe)",
	"host_ports":          "host loopback services reachable inside ([ADDR:]PORT, --host-port)",
	"publish":             "servers inside reachable on the host's loopback (PORT[:HOST], --publish)",
	"toolchains":          "directories put on the command's PATH ahead of the system ones, in order (absolute; each shown inside)",
	"cgroup_base":         "a delegated cgroup v2 directory for the run's cgroup (absolute)",
}

// Schema returns the JSON Schema (draft 2020-12) of a profile, built from
// the Policy type itself: one property per field, no other property
// allowed (Parse refuses unknown fields too). It refuses to build when a
// field has a type it does not know how to spell or no entry in
// fieldDocs.
func Schema() ([]byte, error) {
	props := map[string]any{}
	for _, f := range jsonFields(reflect.TypeFor[Policy]()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			return nil, fmt.Errorf("policy: schema: field %s has no JSON name", f.Name)
		}
		doc, ok := fieldDocs[name]
		if !ok {
			return nil, fmt.Errorf("policy: schema: field %s (%q) has no description in fieldDocs", f.Name, name)
		}
		s, err := fieldSchema(name, f.Type)
		if err != nil {
			return nil, err
		}
		s["description"] = doc
		props[name] = s
	}
	if len(props) != len(fieldDocs) {
		return nil, fmt.Errorf("policy: schema: fieldDocs describes %d fields, Policy has %d", len(fieldDocs), len(props))
	}
	return json.MarshalIndent(map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  SchemaID,
		"title":                "sandbox-run profile (--config)",
		"type":                 "object",
		"additionalProperties": false,
		"properties":           props,
	}, "", "  ")
}

// jsonFields lists the fields of struct t as encoding/json sees them:
// an embedded struct without a JSON name contributes its own fields.
func jsonFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// fieldSchema spells one field's type, with the enumerations Validate
// holds for names.
func fieldSchema(name string, t reflect.Type) (map[string]any, error) {
	strs := map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	switch {
	case name == "sandbox":
		return map[string]any{"enum": []string{string(ModeAuto), string(ModeBwrap), string(ModeLandlock), string(ModeGvisor), string(ModeSeatbelt), string(ModeOff)}}, nil
	case name == "presets":
		strs["items"] = map[string]any{"enum": PresetNames()}
		return strs, nil
	case name == "caches":
		strs["items"] = map[string]any{"enum": CacheNames()}
		return strs, nil
	case name == "memory":
		return map[string]any{"type": []string{"integer", "string"}}, nil
	case contains(sizeFields, name):
		return map[string]any{"type": []string{"integer", "string"}}, nil
	case t == reflect.TypeFor[Duration]():
		return map[string]any{"type": "string"}, nil
	case t == reflect.TypeFor[[]Secret]():
		// A secret names where its value is read, never the value.
		return map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "additionalProperties": false, "required": []string{"name", "hosts"},
			"properties": map[string]any{
				"name":    map[string]any{"type": "string", "description": "the variable that holds the placeholder inside"},
				"hosts":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "host[:port] the credential is bound to (443 when no port)"},
				"from":    map[string]any{"type": "string", "pattern": "^(env|file):", "description": "env:VAR or file:PATH; empty means env:NAME"},
				"in_body": map[string]any{"type": "boolean", "description": "also swap the placeholder in request bodies"},
			}}}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.Int, reflect.Int64:
		return map[string]any{"type": "integer", "minimum": 0}, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return strs, nil
		}
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
			return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}}, nil
		}
	}
	return nil, fmt.Errorf("policy: schema: field %q has type %s, which Schema does not spell", name, t)
}
