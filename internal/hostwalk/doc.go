// Package hostwalk lists host directories, bounded, without following a
// link: the listings themselves (Lister, ReadNames), what a path is
// (Kinds, LstatKind), the sockets and FIFOs below a directory
// (ScanSpecial), and the git directories below the writable directories
// (FindGit, which applies gitrepo's rules at every directory it lists).
//
// Guarantees: every directory is opened with O_NOFOLLOW|O_DIRECTORY
// (a walk below its root through its parent's descriptor), so a link is
// listed as a link and never descended; every walk stops at its bound
// (entries read, levels, things found) and says so, as an error
// (ScanBoundError) or as an incomplete report (GitFinds.Report), never by
// returning less as if it were all.
//
// Non-guarantees: every answer is a snapshot of the moment it was read;
// what is created, renamed or swapped afterwards is not seen (callers
// that act on a path reopen it by descriptor). A directory the caller can
// neither list nor search is skipped (nothing in it is reachable by name
// either). The package is Linux's: it reads getdents64 and /proc.
package hostwalk
