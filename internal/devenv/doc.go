// Package devenv carries into a sandbox the two things a developer's own
// shell gives a command that the sandbox's cleared environment does not:
// the caller's git identity and the directories of the caller's
// toolchains.
//
// Identity: user.name, user.email and init.defaultBranch, read from the
// caller's global git config the way git finds it (GIT_CONFIG_GLOBAL, or
// the XDG file then ~/.gitconfig, the later winning), and nothing else of
// it: no credential helper, alias, hooks path, include or URL rewrite ever
// reaches the command. The three values travel as git's own
// GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n variables, so every
// mechanism carries them the same way and nothing is written on the host.
// Not guaranteed: an identity set only through include.path or
// includeIf is not followed, and these variables rank like git -c, above a
// repository's own user.email.
//
// Toolchains: the directories that exist among Go's (GOROOT or
// /usr/local/go), cargo's bin with rustup's toolchains, volta, pyenv's
// shims, and the node version nvm or fnm selects, are put on PATH and
// shown read-only; a directory in or around a writable directory, the home
// itself, or one the sandbox's uid could not reach is left out and named.
//
// Host files are read as sandbox-run reads its own (invariant 10): never
// in or through a writable directory of the run, never through a link the
// walk did not resolve first.
package devenv
