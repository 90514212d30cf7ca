// Package gitrepo reads what a git directory is and holds, as the host's
// git would find and read it: discovery from a directory (a .git
// directory or "gitdir:" file, a bare repository, a commondir), the
// gitlinks of an index (submodules), the settings of a config that run
// no program (StripConfig), and the git config an environment carries
// (GIT_CONFIG_COUNT).
//
// Guarantees: reading only decides, it never writes or moves anything;
// every file read is opened non-blocking, must be a regular file and is
// read to a bound (a larger one is an error, or its prefix where git too
// reads only a prefix); paths returned are the kernel's resolution (real
// paths), never a lexical clean.
//
// Non-guarantees: to decide as git does, reading follows links (a
// gitdir: line or commondir through a link, a HEAD that is a link), so it
// may read outside the directory asked about; callers act only on the
// real paths returned that lie inside their own directories, reached by
// descriptor. Git's environment variables (GIT_DIR, GIT_COMMON_DIR,
// GIT_CEILING_DIRECTORIES, ...) are not modelled. Discovery and the index
// reader are Linux's; on other systems OutsideRepos finds nothing.
package gitrepo
