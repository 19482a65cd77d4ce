/* softdat-info: shared declarations between the command line (softdat-info.c)
 * and the attribute printers (attrs.c). */
#ifndef SOFTDAT_INFO_H
#define SOFTDAT_INFO_H

#include <dat2/udat.h>

/* One "key: value" line at the attribute indentation. */
void info_line(const char *key, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "DAT_INVALID_PARAMETER DAT_INVALID_ARG1 (0x80060025)" into buf. */
const char *info_strerror(DAT_RETURN ret, char *buf, size_t len);

/* The text form of an IA address ("127.0.0.1", "::1", or a description). */
const char *info_addr(const DAT_SOCK_ADDR *sa, char *buf, size_t len);

void info_print_ia_attr(const DAT_IA_ATTR *a, int verbose);
void info_print_provider_attr(const DAT_PROVIDER_ATTR *p, int verbose);

#endif
