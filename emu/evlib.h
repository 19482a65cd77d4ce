/* libevent, loaded privately.
 *
 * The provider lives inside programs it does not know. Some of them export
 * symbols with libevent's internal names (Open MPI 1.6 exports its bundled
 * libevent 1.4's `epollops`, `pollops`, `selectops`): a libevent linked the
 * ordinary way would bind its own references to the program's copies and
 * crash. So the soft RNIC never links libevent: it dlopens the system
 * libevent with RTLD_DEEPBIND (its own definitions first, then the
 * program's) and calls it through this table. See docs/emu-design.md. */
#ifndef EMU_EVLIB_H
#define EMU_EVLIB_H

#include <stdbool.h>
#include <event2/event.h>

struct emu_evlib {
    struct event_config *(*event_config_new)(void);
    void (*event_config_free)(struct event_config *cfg);
    int (*event_config_set_flag)(struct event_config *cfg, int flag);
    struct event_base *(*event_base_new_with_config)(const struct event_config *cfg);
    void (*event_base_free)(struct event_base *base);
    int (*event_base_loop)(struct event_base *base, int flags);
    int (*event_base_loopbreak)(struct event_base *base);
    struct event *(*event_new)(struct event_base *base, evutil_socket_t fd, short what,
                               event_callback_fn cb, void *arg);
    void (*event_free)(struct event *ev);
    int (*event_add)(struct event *ev, const struct timeval *tv);
    int (*event_del)(struct event *ev);
    void (*event_active)(struct event *ev, int res, short ncalls);
    int (*event_pending)(const struct event *ev, short what, struct timeval *tv);
    int (*evthread_use_pthreads)(void);
};

/* The loaded table, or NULL (logged once) when libevent cannot be loaded.
 * Thread-safe; the libraries stay loaded for the life of the process
 * (libevent's global lock callbacks can never be released). */
const struct emu_evlib *emu_evlib_get(void);

/* How the libraries were bound: true when RTLD_DEEPBIND was used (it is not
 * under sanitizers, whose runtimes refuse it). For tests. */
bool emu_evlib_deepbind(void);

#endif
