module github.com/sandbox-run/sandbox-run

go 1.26.0

require (
	github.com/elazarl/goproxy v1.9.3
	github.com/hashicorp/go-version v1.9.0
	github.com/spf13/pflag v1.1.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require golang.org/x/text v0.43.0 // indirect
