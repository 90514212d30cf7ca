package policy

// srt's settings (sandbox-runtime 0.0.78, SandboxRuntimeConfigSchema in
// its dist/sandbox/sandbox-config.js), key by key. docs/settings.md is
// the same table for people.

const (
	toolOwn     = "configures srt itself (its helper binaries and search), not what the command may do"
	violations  = "only filters what srt reports; sandbox-run's audit records every refusal"
	proxyPortFx = "remove it: sandbox-run's egress goes through its own proxy, or a node-wide one on a Unix socket (--egress-socket)"
)

var srtKeys = map[string]handler{
	"network":                      object(srtNetworkKeys),
	"filesystem":                   object(srtFilesystemKeys),
	"credentials":                  needs("secret"),
	"ignoreViolations":             notApplicable(violations),
	"enableWeakerNestedSandbox":    weakensIfTrue("it drops the sandbox's own /proc and namespaces for running inside an unprivileged container"),
	"enableWeakerNetworkIsolation": weakensIfTrue("it opens macOS's trustd service, an exfiltration path"),
	"allowAppleEvents":             weakensIfTrue("the command could launch other applications outside the sandbox"),
	"allowPty":                     weakensIfTrue("it widens the macOS profile to every pseudo-terminal; sandbox-run gives the command a terminal of its own with --tty"),
	"ripgrep":                      notApplicable(toolOwn),
	"mandatoryDenySearchDepth":     heldBoolOrNumber("sandbox-run protects git metadata and tool configs at any depth"),
	"seccomp":                      notApplicable(toolOwn),
	"bwrapPath":                    notApplicable(toolOwn + "; sandbox-run's own is --bwrap"),
	"socatPath":                    notApplicable(toolOwn),
	"javaAgentJarPath":             notApplicable(toolOwn),
	"windows":                      notApplicable("configures srt on Windows, where sandbox-run does not run commands in a sandbox"),
	"git":                          notApplicable("git's safe.directory for srt's sandbox user; sandbox-run's command owns nothing it needs it for"),
}

var srtNetworkKeys = map[string]handler{
	"allowedDomains":          hostList(false),
	"deniedDomains":           hostList(true),
	"deniedDomainReasons":     notApplicable("messages for denied hosts; sandbox-run's refusals carry their own reason"),
	"strictAllowlist":         heldBool("sandbox-run never asks: every host its allow-list does not name is refused"),
	"deniedResolvedAddresses": deniedAddresses(),
	"allowUnixSockets":        needs("unix-socket"),
	"allowAllUnixSockets":     weakensIfTrue("the command could connect to every Unix socket it can reach"),
	"allowLocalBinding":       localBinding,
	"allowMachLookup":         weakensIfAny("it opens macOS services (XPC/Mach) to the command"),
	"httpProxyPort":           unsupported("a proxy on a TCP port is not sandbox-run's egress", proxyPortFx),
	"socksProxyPort":          unsupported("a proxy on a TCP port is not sandbox-run's egress", proxyPortFx),
	"mitmProxy":               unsupported("an upstream interception proxy is not supported", "remove the block"),
	"parentProxy":             unsupported("an upstream proxy is not supported", "remove the block; a node-wide proxy is --egress-socket"),
	"filterRequest":           unsupported("a request filter is a JavaScript function, not settings", "remove it"),
	"tlsTerminate":            needs("tls"),
}

var srtFilesystemKeys = map[string]handler{
	"disabled":       weakensIfTrue("it drops every file system rule"),
	"denyRead":       pathList(func(s *settingsRun) *[]pathEntry { return &s.denyRead }, resolveSrt),
	"allowRead":      pathList(func(s *settingsRun) *[]pathEntry { return &s.allowRead }, resolveSrt),
	"allowWrite":     pathList(func(s *settingsRun) *[]pathEntry { return &s.allowWrite }, resolveSrt),
	"denyWrite":      pathList(func(s *settingsRun) *[]pathEntry { return &s.denyWrite }, resolveSrt),
	"allowGitConfig": weakensIfTrue("the command could write .git/config, which makes host git run programs"),
}
