/* The single socket exit and entry of the soft RNIC (emu/wire_io.h). */
#include "emu/wire_io.h"

#include <errno.h>
#include <stdatomic.h>

static _Atomic(const struct emu_wire_observer *) observer;

void emu_wire_observe(const struct emu_wire_observer *obs)
{
    atomic_store_explicit(&observer, obs, memory_order_release);
}

static void tell(const void *who, enum emu_wire_dir dir, const struct iovec *iov, size_t iovcnt,
                 ssize_t n)
{
    const struct emu_wire_observer *o = atomic_load_explicit(&observer, memory_order_acquire);
    if (!o || n <= 0)
        return;
    /* MSG_TRUNC may report more than the buffers held: what they hold. */
    size_t room = 0;
    for (size_t i = 0; i < iovcnt; i++)
        room += iov[i].iov_len;
    int saved = errno;
    o->bytes(o->ctx, who, dir, iov, iovcnt, (size_t)n < room ? (size_t)n : room);
    errno = saved;
}

ssize_t emu_wire_send(const void *who, int fd, const struct msghdr *mh, int flags)
{
    ssize_t n = sendmsg(fd, mh, flags);
    tell(who, EMU_WIRE_TX, mh->msg_iov, mh->msg_iovlen, n);
    return n;
}

ssize_t emu_wire_recv(const void *who, int fd, struct msghdr *mh, int flags)
{
    ssize_t n = recvmsg(fd, mh, flags);
    tell(who, EMU_WIRE_RX, mh->msg_iov, mh->msg_iovlen, n);
    return n;
}

/* One buffer: send(2)/recv(2) themselves, the syscalls the callers made
 * before they came through here (cheaper than sendmsg/recvmsg: no iovec
 * to import). */
ssize_t emu_wire_send1(const void *who, int fd, const void *buf, size_t len, int flags)
{
    ssize_t n = send(fd, buf, len, flags);
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    tell(who, EMU_WIRE_TX, &v, 1, n);
    return n;
}

ssize_t emu_wire_recv1(const void *who, int fd, void *buf, size_t len, int flags)
{
    ssize_t n = recv(fd, buf, len, flags);
    struct iovec v = {.iov_base = buf, .iov_len = len};
    tell(who, EMU_WIRE_RX, &v, 1, n);
    return n;
}
