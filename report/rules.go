package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/internal/exitcode"
)

// ExecClass is the class of a command that could not be started: code is
// exitcode.NotExecutable or ExitNotFound.
func ExecClass(code int) ExitClass {
	if code == exitcode.NotExecutable {
		return ClassNotExecutable
	}
	return ClassNotFound
}

// digestVersion names the canonical form hashed into EnvironmentDigest;
// change it whenever that form changes.
const digestVersion = "sandbox-run/environment/v2"

// Digest hashes what the run's environment was: the protections
// configured, the limits, the network and the mounts. Not the command, its
// arguments or its output. Two runs under the same policy on the same node
// get the same digest; a run with any protection, limit, mount or network
// setting changed gets another.
func Digest(r *Report) string {
	type prot struct {
		Name       string `json:"n"`
		Configured bool   `json:"c"`
	}
	canon := struct {
		V          string   `json:"v"`
		Tier       int      `json:"tier"`
		Mechanism  string   `json:"mechanism"`
		Platform   string   `json:"platform"`
		Prot       []prot   `json:"protections"`
		Ptrace     bool     `json:"ptrace"`
		Network    string   `json:"network"`
		Allow      []string `json:"allow"`
		HTTP       []string `json:"http,omitempty"`
		Writable   []string `json:"writable"`
		ReadOnly   []string `json:"read_only"`
		Protected  []string `json:"protected"`
		TmpSize    int64    `json:"tmp_size"`
		ShmSize    int64    `json:"shm_size"`
		Limits     []Limit  `json:"limits"`
		HostUID    int      `json:"host_uid"`
		HostGID    int      `json:"host_gid"`
		EnvNames   []string `json:"env"`
		TimeoutSec float64  `json:"timeout"`
	}{
		V: digestVersion, Tier: r.Tier, Mechanism: r.Mechanism, Platform: r.Platform,
		Network: r.Network, HostUID: r.HostUID, HostGID: r.HostGID, TmpSize: r.TmpSize, ShmSize: TmpfsSize(r.Tmpfs, "/dev/shm"),
		Allow: sorted(r.AllowHosts), HTTP: tlsRules(r.TLS), Writable: sorted(r.Writable), ReadOnly: sorted(r.ReadOnly),
		Protected: sorted(append(append(append([]string(nil), r.Protected...), r.Watched...), r.Copied...)), EnvNames: sorted(r.EnvNames), Limits: r.Limits, TimeoutSec: r.TimeoutSec,
	}
	if r.Seccomp != nil {
		canon.Ptrace = r.Seccomp.Ptrace
	}
	for _, p := range r.Protections {
		canon.Prot = append(canon.Prot, prot{p.Name, p.Configured})
	}
	slices.SortFunc(canon.Prot, func(a, b prot) int { return strings.Compare(a.Name, b.Name) })
	b, _ := json.Marshal(canon)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	slices.Sort(out)
	return out
}

// SourceOf is SourceDefault when the policy leaves v at zero.
func SourceOf(v int64) string {
	if v == 0 {
		return SourceDefault
	}
	return SourcePolicy
}

// Classify names how the run ended.
func Classify(code int, class ExitClass) *Exit {
	if class != "" {
		return &Exit{Code: code, Class: class}
	}
	if _, ok := exitcode.Signal(code); ok {
		return &Exit{Code: code, Class: ClassSignaled}
	}
	return &Exit{Code: code, Class: ClassExited}
}

// TmpfsSize is the ceiling ts names for the tmpfs at path, 0 when none.
func TmpfsSize(ts []TmpfsReport, path string) int64 {
	for _, t := range ts {
		if t.Path == path {
			return t.Size
		}
	}
	return 0
}

// tlsRules is the TLS rules in force, sorted; nil-safe, for the digest.
func tlsRules(t *TLSReport) []string {
	if t == nil {
		return nil
	}
	return sorted(t.Rules)
}
