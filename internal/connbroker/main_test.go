package connbroker

import (
	"os"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/sandboxtest"
)

func TestMain(m *testing.M) {
	sandboxtest.RunHelper(helpers())
	os.Exit(sandboxtest.RunLeakChecked(m))
}
