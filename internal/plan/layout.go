package plan

// Layout is how a mechanism asks for its run's plan: how its binds are
// made and what becomes of protected paths it cannot hold in place. The
// skeleton builds the plan once, as the mechanism's host asks, and hands
// it over; the zero value is a plan by path, with sizes left to the
// mechanism and protected paths held by binds onto themselves.
type Layout struct {
	// ByFD binds every vetted source by a descriptor numbered from
	// FDBase (bwrap with --bind-fd); otherwise by path.
	ByFD   bool
	FDBase int
	// Size says the mechanism can size the sandbox's own tmpfs (bwrap's
	// --size, gVisor's and Landlock's plans, which size nothing).
	Size bool
	// Lent is the writable directory whose owner is lent to the sandbox's
	// uid (--map-owner): it need not be writable for that uid. "" for
	// none.
	Lent string
	// Copies keeps a copy of every existing protected path, put back if
	// the run changed it, for a mechanism that cannot hold it read-only
	// (Landlock, whose grants beneath a writable directory cannot be
	// taken away).
	Copies bool
}
