/* Which sanitizer this translation unit is built with, whichever compiler
 * (gcc defines __SANITIZE_*__, clang answers __has_feature): 1 or 0.
 * SD_SANITIZER_THREAD: ThreadSanitizer; SD_SANITIZER_ANY: it or
 * AddressSanitizer. */
#ifndef SOFTDAT_EMU_SANITIZER_H
#define SOFTDAT_EMU_SANITIZER_H

#if defined(__SANITIZE_THREAD__)
#define SD_SANITIZER_THREAD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SD_SANITIZER_THREAD 1
#endif
#endif
#ifndef SD_SANITIZER_THREAD
#define SD_SANITIZER_THREAD 0
#endif

#if SD_SANITIZER_THREAD || defined(__SANITIZE_ADDRESS__)
#define SD_SANITIZER_ANY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SD_SANITIZER_ANY 1
#endif
#endif
#ifndef SD_SANITIZER_ANY
#define SD_SANITIZER_ANY 0
#endif

#endif
