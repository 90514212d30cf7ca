//go:build !linux

package plan

// Plan is Linux's: elsewhere no mechanism translates a mount plan
// (Seatbelt renders its profile from the policy, tier 0 has none), and
// the skeleton never builds one.
type Plan struct{}

// Close does nothing: there is nothing to release.
func (*Plan) Close() {}
