/*
 * softdat — DAT 2.0 public headers: vendor additions to the user API.
 * softdat adds none beyond those of <dat2/dat_vendor_specific.h>.
 */
#ifndef SOFTDAT_DAT2_UDAT_VENDOR_SPECIFIC_H
#define SOFTDAT_DAT2_UDAT_VENDOR_SPECIFIC_H

#include <dat2/dat_vendor_specific.h>

#endif /* SOFTDAT_DAT2_UDAT_VENDOR_SPECIFIC_H */
