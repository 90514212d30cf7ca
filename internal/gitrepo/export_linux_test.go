package gitrepo

// Discover is gitDirs for the external tests, which compare it with the
// host's git and with hostwalk's sweep (an import gitrepo's own tests
// cannot make).
var Discover = gitDirs
