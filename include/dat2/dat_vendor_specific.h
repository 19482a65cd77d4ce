/*
 * softdat — DAT 2.0 public headers: vendor additions common to the user and
 * kernel APIs. softdat adds none; the file exists because consumers and the
 * DAT layout expect it.
 */
#ifndef SOFTDAT_DAT2_VENDOR_SPECIFIC_H
#define SOFTDAT_DAT2_VENDOR_SPECIFIC_H

#endif /* SOFTDAT_DAT2_VENDOR_SPECIFIC_H */
