// Package pathguard refuses every bind that is reachable through a directory
// the sandboxed command can write.
//
// The command is hostile and may write its writable directories (--workdir,
// --write). Whatever it leaves there outlives the run: a symbolic link
// planted in session 1 is still there when session 2 builds its binds. If
// the launcher then bind-mounts a path whose resolution follows that link, it
// mounts whatever the command chose (the symlink mount-redirection class of
// advisories against bubblewrap and flatpak). pathguard resolves each path
// one component at a time ([Resolve]), records everything the walk touched,
// and refuses ([Guard.CheckRead], [Guard.CheckDest], [New]) when any of it
// lies in the writable set. [Resolution.Open] then pins the checked inode as
// an O_PATH descriptor for bwrap's --ro-bind-fd/--bind-fd.
//
// A typical launcher:
//
//	g, err := pathguard.New(writableDirs)       // refuses W reached via a link in another W
//	for _, w := range g.Writable() { f, err := w.Open(); ... --bind-fd }
//	r, err := g.CheckRead(src)                  // *EscapeError, errors.Is(err, ErrEscape)
//	f, err := r.Open()                          // ... --ro-bind-fd
//	err = g.CheckDest(dst)                      // for destinations inside a writable dir
//
// The same walk guards the files sandbox-run itself opens on the host: a
// report, an audit log, a profile, a socket, its cache. [Guard.CheckHost]
// refuses one that lies in or resolves through a writable directory;
// [OpenFile], [WriteFile], [RemoveIfSame] and [ListenUnix] open the rest
// without following a link in any component; [OpenPrivateDir] opens
// sandbox-run's own state directories, trusting only what the effective
// uid owns and nobody else may write.
//
// # Guarantees
//
//   - The writable set holds each writable directory in two spellings: as
//     given, and fully resolved. "Inside" compares whole components (/a/bc is
//     not inside /a/b) and includes equality. A directory on a walk that is
//     the same directory (device and inode) as a writable one, such as a bind
//     mount of it elsewhere, counts as a third spelling.
//   - [Guard.CheckRead] accepts a source only if no path its walk visited is
//     inside the writable set: not the path, not a prefix, not a symbolic
//     link on the way, not a link's target (as spelled, or as reached), and
//     not the final path. Resolution follows the kernel: at most 40 links
//     (ELOOP after), ".." after a link relative to where the link led,
//     relative targets from the link's directory, absolute ones from /.
//   - [New] refuses a writable directory whose walk follows a link inside
//     another writable directory, and [Guard.CheckDest] a destination whose
//     walk follows a link inside a writable directory (bwrap follows links at
//     destinations).
//   - [Resolution.Open] returns a descriptor to the very inode the walk saw at
//     the final path, opened without following any link, or an error. A
//     link planted or a rename done between the check and the open makes
//     Open fail; it never opens something else.
//   - Every refusal is an [*EscapeError] matching [ErrEscape], whose message is
//     one line naming the bind, the link followed, the writable directory and
//     the fix.
//   - Host files (Linux): [OpenFile], [WriteFile], [RemoveIfSame] and
//     [ListenUnix] pin the file's directory as an O_PATH descriptor opened
//     with RESOLVE_NO_SYMLINKS (or the openat walk) and act on the last
//     component relative to it with O_NOFOLLOW; they never follow a link,
//     refuse an existing file that is not regular ([ErrNotRegular]) before
//     opening it for reading or writing, and [WriteFile] writes a new file
//     (O_CREAT|O_EXCL) renamed over the old one.
//   - Private state (Linux): [OpenPrivateDir] makes missing directories one
//     component at a time without following links; a final directory (or,
//     through [Dir.ReadFile], an entry) not owned by the effective uid,
//     writable by group or others, or of the wrong kind is untrusted
//     ([ErrUntrusted]): a directory is set aside unread and made again, an
//     entry is not read.
//
// # Non-guarantees
//
//   - Hard links are not links. A hard link inside a writable directory to a
//     file elsewhere, or one elsewhere to a file inside it, is the same inode
//     under two names; no path walk can tell. Directories cannot be hard
//     linked, so this is limited to files (and the command can only create
//     hard links to files it can already reach).
//   - Mounts already in place are taken as they are. A bind mount of a
//     writable directory is caught only when the walk passes through its
//     root directory (the same-inode rule); a bind mount of a subdirectory of
//     a writable directory elsewhere is not.
//   - Destinations are checked against the host tree at the same paths,
//     which is what the sandbox sees for a writable directory mounted at its
//     own path. Nothing here guards a destination path that means something
//     else inside the new root.
//   - The checks describe the file system when they run. Binding by path
//     afterwards leaves a window in which a concurrent writer (another
//     session sharing the writable directory, or any host process) can
//     change it; only [Resolution.Open] plus --ro-bind-fd/--bind-fd closes
//     that window for sources. Where bwrap lacks those options the launcher
//     must bind by path and report "binds by path: race window".
//     Destinations have no fd form in bwrap: the writable set must not be
//     written by anyone else until bwrap has mounted.
//   - A [Resolver] (one memo of Lstat and Readlink for the walks of one
//     plan) moves "when they run" back to when a walk of the plan first
//     reached each component, milliseconds earlier. Nothing above depends
//     on the walk being recent: [Resolution.Open] and the host-file openers
//     read no memo, so a stale one makes them fail, never act elsewhere;
//     binds by path and destinations already had a window, now slightly
//     longer. Absent components are not remembered.
//   - Over-refusal is accepted: a link target is also checked as spelled
//     (joined lexically), which may name a writable path the kernel would
//     not actually reach.
//   - Host files are checked for links, not for who else may write their
//     directory: a report path in a directory another host user can write
//     is taken as it is. A link among the parents of a private directory
//     makes [OpenPrivateDir] fail; it is not followed.
//   - A source that does not exist is not refused by the check itself
//     (Exists reports it); the caller decides (bwrap's --ro-bind-try skips it).
//
// # Platform differences
//
// The path walk and the rules use only the standard library and work on
// every system whose paths are slash separated (Linux, macOS, the BSDs); on
// Windows [Resolve] and everything built on it fail with an error wrapping
// [errors.ErrUnsupported]. [Resolution.Open] is Linux only: it uses openat2
// (Linux 5.6) and falls back to an openat walk when openat2 is missing or
// blocked by seccomp (ENOSYS or EPERM). Elsewhere it fails with an error
// wrapping [errors.ErrUnsupported]; macOS Seatbelt profiles name paths, so
// the race window above stays open there. Outside Linux, [OpenFile],
// [WriteFile] and [ListenUnix] check every component with Lstat before
// acting, so a link planted in between is followed; [OpenPrivateDir] is
// Linux only.
package pathguard
