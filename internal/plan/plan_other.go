//go:build !linux

package plan

// Plan elsewhere is a plan by path (ByPath): no mount, only the paths a
// mechanism that matches paths (Seatbelt) translates.
type Plan struct {
	Paths
}

// Close does nothing: there is nothing to release.
func (*Plan) Close() {}
