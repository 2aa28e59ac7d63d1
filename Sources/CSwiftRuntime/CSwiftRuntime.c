// The module only declares a function of the Swift runtime (include/CSwiftRuntime.h); a C
// target needs a source file.
#include "CSwiftRuntime.h"
