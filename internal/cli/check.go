package cli

import (
	"context"
	"fmt"
)

func checkCmd(ctx context.Context, args []string, stdio IO) int {
	return fail(stdio.Stderr, fmt.Errorf("check is not built yet; fix: use sandbox-run run --summary -- true to see what a run sets up"))
}
