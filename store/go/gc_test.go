package claimstore_test

import (
	"runtime"
	"runtime/debug"
)

func runtime_GC() {
	runtime.GC()
	debug.FreeOSMemory()
}
