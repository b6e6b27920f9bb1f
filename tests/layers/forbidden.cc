// Compiled with the include root of one layer (tests/layers/CMakeLists.txt):
// with -DREACH_UP it includes a header of a layer that one may not use and
// must not compile; without, it includes only what the layer may use.
#ifdef CODEC
#include "codec/json_reader.h"
#include "record/record_edit.h"
#ifdef REACH_UP
#include "db/database.h"  // the codec knows nothing of RocksDB
#endif
#endif

#ifdef STATE
#include "db/database.h"
#include "state/published_state.h"
#ifdef REACH_UP
#include "store/store_impl.h"  // nothing below store/ includes store_impl.h
#endif
#endif

int main() { return 0; }
