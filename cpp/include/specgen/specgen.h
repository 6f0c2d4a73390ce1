/* specgen public C API. Filled in by the user-surface work (issue 3). */
#ifndef SPECGEN_H
#define SPECGEN_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#define SPECGEN_API __attribute__((visibility("default")))
SPECGEN_API const char* specgen_version(void);
#ifdef __cplusplus
}
#endif
#endif
