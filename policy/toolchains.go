package policy

import (
	"fmt"
	"path/filepath"
	"strings"
)

// toolchainPath is PATH with the policy's Toolchains ahead of system.
func (p Policy) toolchainPath(system string) string {
	if len(p.Toolchains) == 0 {
		return system
	}
	return strings.Join(p.Toolchains, ":") + ":" + system
}

// validateToolchains refuses a toolchain directory that is not an
// absolute clean path, or that holds ':' (it would split PATH), or that
// lies in a writable directory (the command could then plant what a later
// command of the same name runs; PATH names it, nothing binds it).
func (p Policy) validateToolchains() error {
	for _, d := range p.Toolchains {
		if err := checkPath("toolchains", d); err != nil {
			return err
		}
		if filepath.Clean(d) != d || strings.ContainsRune(d, ':') {
			return invalid("toolchains", fmt.Sprintf("%q is not a clean directory without ':'", d), "name the directory by its clean absolute path")
		}
		for _, w := range p.Writable() {
			if Within(d, filepath.Clean(w)) {
				return invalid("toolchains", fmt.Sprintf("%q lies in the writable directory %s", d, w),
					"install the toolchain outside every --workdir and --write dir, or leave it out of toolchains")
			}
		}
	}
	return nil
}
