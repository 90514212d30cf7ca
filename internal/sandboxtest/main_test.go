package sandboxtest

import (
	"fmt"
	"os"
	"testing"
)

// testHelpers are the helper modes TestRunHelper re-executes this test
// binary in.
var testHelpers = map[string]func() int{
	"exit-3": func() int { fmt.Println("helper exit-3 ran"); return 3 },
}

// TestMain serves the test host inside its namespace (ServeTestHost) and
// the helper modes of TestRunHelper.
func TestMain(m *testing.M) {
	ServeTestHost()
	RunHelper(testHelpers)
	os.Exit(m.Run())
}
