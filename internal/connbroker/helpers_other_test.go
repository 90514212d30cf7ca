//go:build !linux

package connbroker

func helpers() map[string]func() int { return nil }
