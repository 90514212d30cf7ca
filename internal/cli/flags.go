package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// onceValue refuses a second value for a flag that holds one: with
// "--workdir a --workdir b" the last would silently win, and a harness that
// appends a restriction to a user's flags would not get the one it asked
// for.
type onceValue struct {
	pflag.Value
	name  string
	set   bool
	empty bool // an empty value is refused (paths, sockets)
}

func (v *onceValue) Set(s string) error {
	if v.set {
		return fmt.Errorf("given more than once; --%s takes one value", v.name)
	}
	if v.empty && s == "" {
		return fmt.Errorf("empty; --%s needs a value", v.name)
	}
	v.set = true
	return v.Value.Set(s)
}

// IsBoolFlag keeps "--dry-run" (no value) working for wrapped bool flags.
func (v *onceValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// strict wraps every single-valued flag of fs in a onceValue; nonEmpty
// names the flags whose value may not be "" either. Repeatable flags
// (string arrays) keep every value.
func strict(fs *pflag.FlagSet, nonEmpty ...string) {
	ne := map[string]bool{}
	for _, n := range nonEmpty {
		ne[n] = true
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if _, done := f.Value.(*onceValue); done {
			return
		}
		if strings.HasSuffix(f.Value.Type(), "Array") || strings.HasSuffix(f.Value.Type(), "Slice") {
			return
		}
		f.Value = &onceValue{Value: f.Value, name: f.Name, empty: ne[f.Name]}
	})
}
