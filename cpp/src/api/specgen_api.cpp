#include "specgen/specgen.h"
extern "C" const char* specgen_version(void) { return "0.1.0"; }
