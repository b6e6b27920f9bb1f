package bench

import "context"

// ctx is the context of the calls that take one in these tests.
var ctx = context.Background()
