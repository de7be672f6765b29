package gannet

// The progress callback of Open. A file with //export may only declare C in its preamble; the
// C wrapper that turns it into a gannet_progress_fn is in gannet.go.

/*
#include <stdint.h>
#include "gannet/gannet.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export gannetGoProgress
func gannetGoProgress(user unsafe.Pointer, p *C.gannet_progress_t) C.int32_t {
	state := cgo.Handle(*(*C.uintptr_t)(user)).Value().(*progressState)
	if state.panic != nil || p == nil {
		return abortIf(state.panic != nil)
	}
	progress := Progress{
		Fraction:       float64(p.fraction),
		BytesDone:      int64(p.bytes_done),
		BytesTotal:     int64(p.bytes_total),
		Elapsed:        seconds(float64(p.elapsed_s)),
		BytesPerSecond: float64(p.bytes_per_s),
		ETA:            -1,
	}
	if p.stage != nil {
		progress.Stage = C.GoString(p.stage)
	}
	if p.eta_s >= 0 {
		progress.ETA = seconds(float64(p.eta_s))
	}
	// A Go panic must not unwind through the library's C++ frames: it aborts the load and Open
	// re-raises it.
	goOn := false
	func() {
		defer func() {
			if r := recover(); r != nil {
				state.panic = r
			}
		}()
		goOn = state.f(progress)
	}()
	return abortIf(!goOn)
}

func abortIf(abort bool) C.int32_t {
	if abort {
		return 1
	}
	return 0
}
