//go:build linux && !amd64 && !arm64

package connbroker

// nativeArch is unknown here: Install refuses.
const nativeArch = 0
