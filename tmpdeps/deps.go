package tmpdeps

import (
	_ "github.com/elazarl/goproxy"
	_ "github.com/hashicorp/go-version"
	_ "github.com/spf13/pflag"
	_ "golang.org/x/net/bpf"
	_ "golang.org/x/sys/unix"
)
