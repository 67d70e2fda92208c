package bench

import "context"

func runFailover(ctx context.Context, e *env) ([]Section, error) { return nil, nil }
func runRolling(ctx context.Context, e *env) ([]Section, error)  { return nil, nil }
