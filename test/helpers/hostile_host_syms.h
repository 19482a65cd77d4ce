/* The symbols a host program can export that libevent 2.x also defines:
 * Open MPI 1.6 exports its bundled libevent 1.4's backend tables under
 * these names. Layout of a libevent 1.4 `struct eventop`: a name and six
 * function pointers, nothing like 2.x's. A libevent that binds to these
 * finds no usable backend ("no event mechanism available") or crashes.
 * Include once per program, which must link with -rdynamic so that the
 * dynamic loader sees the definitions, as it does in such a host. */
#ifndef HOSTILE_HOST_SYMS_H
#define HOSTILE_HOST_SYMS_H

struct libevent14_eventop {
    const char *name;
    void *(*init)(void *base);
    int (*add)(void *arg, void *ev);
    int (*del)(void *arg, void *ev);
    int (*dispatch)(void *base, void *arg, void *tv);
    void (*dealloc)(void *base, void *arg);
    int need_reinit;
};

#define HOSTILE_EXPORT __attribute__((visibility("default"), used))
HOSTILE_EXPORT const struct libevent14_eventop epollops = {"epoll", 0, 0, 0, 0, 0, 0};
HOSTILE_EXPORT const struct libevent14_eventop pollops = {"poll", 0, 0, 0, 0, 0, 0};
HOSTILE_EXPORT const struct libevent14_eventop selectops = {"select", 0, 0, 0, 0, 0, 0};

#endif
