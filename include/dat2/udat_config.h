/*
 * softdat — DAT 2.0 public headers: build configuration of the user API.
 *
 * The specification's sample file names version 1.2; the deployed DAT 2.0
 * registries match providers on 2.0 (dat.conf "u2.0"), so dat_ia_open()
 * must pass 2.0. DAT_EXTENSIONS is always on: it adds the extension slot to
 * DAT_PROVIDER, the extension payload to DAT_EVENT and the extension fields
 * to DAT_IA_ATTR, and every deployed consumer is built that way.
 */
#ifndef SOFTDAT_DAT2_UDAT_CONFIG_H
#define SOFTDAT_DAT2_UDAT_CONFIG_H

#define DAT_VERSION_MAJOR 2
#define DAT_VERSION_MINOR 0

/* dat_ia_open() asks for a non-thread-safe provider unless told otherwise. */
#ifndef DAT_THREADSAFE
#define DAT_THREADSAFE DAT_FALSE
#endif

#ifndef DAT_EXTENSIONS
#define DAT_EXTENSIONS 1
#endif

#endif /* SOFTDAT_DAT2_UDAT_CONFIG_H */
