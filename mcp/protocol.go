package mcp

// The protocol names the relay reads: JSON-RPC 2.0's error codes and the
// Model Context Protocol's method names and _meta keys, as the two
// specifications write them. The relay parses every message itself, so
// it needs no SDK: linking one would cost every start of sandbox-run its
// package initialisers, for constants.

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700 // the message is not JSON
	codeInvalidRequest = -32600 // JSON, but not a request
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

// MCP methods and notifications.
const (
	methodInitialize             = "initialize"
	methodToolsList              = "tools/list"
	methodToolsCall              = "tools/call"
	methodPromptsList            = "prompts/list"
	methodPromptsGet             = "prompts/get"
	methodResourcesList          = "resources/list"
	methodResourcesTemplatesList = "resources/templates/list"
	methodResourcesRead          = "resources/read"
	methodResourcesSubscribe     = "resources/subscribe"
	methodResourcesUnsubscribe   = "resources/unsubscribe"
	methodComplete               = "completion/complete"

	// Requests a server sends its client.
	methodSamplingCreateMessage = "sampling/createMessage"
	methodElicitationCreate     = "elicitation/create"
	methodListRoots             = "roots/list"

	notificationCancelled       = "notifications/cancelled"
	notificationResourceUpdated = "notifications/resources/updated"
)

// MCP _meta keys and result types the relay reads.
const (
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	resultInputRequired    = "input_required"
)
