/* Private loading of libevent. See evlib.h for why. */
#include "emu/evlib.h"

#include "emu/log.h"
#include "emu/sanitizer.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>

/* Sonames come from the build (Makefile reads them off the libraries
 * pkg-config names), so a different libevent 2.x build still loads. */
#ifndef SOFTDAT_EVENT_CORE_SONAME
#define SOFTDAT_EVENT_CORE_SONAME "libevent_core-2.1.so.7"
#endif
#ifndef SOFTDAT_EVENT_PTHREADS_SONAME
#define SOFTDAT_EVENT_PTHREADS_SONAME "libevent_pthreads-2.1.so.7"
#endif

/* ASan and TSan abort on RTLD_DEEPBIND (their interceptors would be
 * bypassed); sanitizer builds bind the ordinary way. */
#if SD_SANITIZER_ANY
#define EVLIB_DEEPBIND 0
#else
#define EVLIB_DEEPBIND RTLD_DEEPBIND
#endif

static struct emu_evlib g_lib;
static bool g_ok;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void *open_private(const char *soname)
{
    /* RTLD_LOCAL: nothing of libevent enters the global scope, so it can
     * neither capture nor be captured. RTLD_NODELETE: see evlib.h. */
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE | EVLIB_DEEPBIND);
    if (h == NULL)
        SD_ERR("engine", "cannot load %s: %s (install libevent-2.1-7 / libevent-pthreads-2.1-7)",
               soname, dlerror());
    return h;
}

static bool resolve(void *h, const char *name, void **slot)
{
    *slot = dlsym(h, name);
    if (*slot == NULL)
        SD_ERR("engine", "libevent lacks %s: %s", name, dlerror());
    return *slot != NULL;
}

#define RESOLVE(h, fn) resolve((h), #fn, (void **)&g_lib.fn)

static void load(void)
{
    /* core first, so that it too is relocated with DEEPBIND when nothing
     * in the process has loaded it yet. */
    void *core = open_private(SOFTDAT_EVENT_CORE_SONAME);
    void *thr = core ? open_private(SOFTDAT_EVENT_PTHREADS_SONAME) : NULL;
    if (thr == NULL)
        return;
    bool ok = RESOLVE(core, event_config_new) && RESOLVE(core, event_config_free) &&
              RESOLVE(core, event_config_set_flag) &&
              RESOLVE(core, event_base_new_with_config) && RESOLVE(core, event_base_free) &&
              RESOLVE(core, event_base_loop) && RESOLVE(core, event_base_loopbreak) &&
              RESOLVE(core, event_new) && RESOLVE(core, event_free) &&
              RESOLVE(core, event_add) && RESOLVE(core, event_del) &&
              RESOLVE(core, event_active) && RESOLVE(core, event_pending) &&
              RESOLVE(thr, evthread_use_pthreads);
    if (ok && g_lib.evthread_use_pthreads() != 0) {
        SD_ERR("engine", "evthread_use_pthreads failed");
        ok = false;
    }
    g_ok = ok;
}

const struct emu_evlib *emu_evlib_get(void)
{
    pthread_once(&g_once, load);
    return g_ok ? &g_lib : NULL;
}

bool emu_evlib_deepbind(void)
{
    return EVLIB_DEEPBIND != 0;
}
