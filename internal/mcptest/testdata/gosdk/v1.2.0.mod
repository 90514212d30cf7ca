module example.com/gosdk

go 1.24

require github.com/modelcontextprotocol/go-sdk v1.2.0

require (
	github.com/google/jsonschema-go v0.3.0 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.30.0 // indirect
)
