/* The single socket exit and entry of the soft RNIC (emu/wire_io.h). */
#include "emu/wire_io.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "emu/log.h"
#include "emu/sanitizer.h"

static _Atomic(const struct emu_wire_observer *) observer;

void emu_wire_observe(const struct emu_wire_observer *obs)
{
    atomic_store_explicit(&observer, obs, memory_order_release);
}

void emu_wire_ep_init(struct emu_wire_ep *ep, bool datagram, uint32_t ia, uint64_t ia_t0_ns)
{
    atomic_init(&ep->tap, NULL);
    atomic_init(&ep->conn_id, 0);
    ep->ia = ia;
    ep->ia_t0_ns = ia_t0_ns;
    ep->datagram = datagram;
}

void emu_wire_ep_set_peer(struct emu_wire_ep *ep, const struct sockaddr *sa, socklen_t len)
{
    if (len > sizeof ep->peer)
        len = sizeof ep->peer;
    memcpy(&ep->peer, sa, len);
    ep->peer_len = len;
}

void emu_wire_ep_fini(struct emu_wire_ep *ep)
{
    if (atomic_load_explicit(&ep->tap, memory_order_acquire) == NULL)
        return;
    const struct emu_wire_observer *o = atomic_load_explicit(&observer, memory_order_acquire);
    if (o && o->release)
        o->release(o->ctx, ep);
    atomic_store_explicit(&ep->tap, NULL, memory_order_relaxed);
}

/* The system calls themselves rather than libc's wrappers. Those are
 * cancellation points, and in a threaded process they switch the thread's
 * cancellation type around each call with two atomic operations: 10-25 ns
 * of an empty recv(2)'s 250 (a polling pass that finds nothing is one).
 * The socket calls here are made with the provider's locks held, where a
 * cancellation could only leave them held. Sanitizer builds keep libc's
 * calls, which the sanitizers intercept (buffer checks, the thread model). */
#if SD_SANITIZER_ANY
#define sys_sendmsg sendmsg
#define sys_recvmsg recvmsg
#define sys_sendto sendto
#define sys_recv recv
#else
static inline ssize_t sys_sendmsg(int fd, const struct msghdr *mh, int flags)
{
    return syscall(SYS_sendmsg, fd, mh, flags);
}

static inline ssize_t sys_recvmsg(int fd, struct msghdr *mh, int flags)
{
    return syscall(SYS_recvmsg, fd, mh, flags);
}

static inline ssize_t sys_sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
                                 socklen_t tolen)
{
    return syscall(SYS_sendto, fd, buf, len, flags, to, tolen);
}

static inline ssize_t sys_recv(int fd, void *buf, size_t len, int flags)
{
    return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}
#endif

/* CLOCK_MONOTONIC now when an observer is installed (it gets the time
 * the call began), else 0 without a clock read. */
static inline uint64_t began(void)
{
    return __builtin_expect(atomic_load_explicit(&observer, memory_order_relaxed) != NULL, 0) ? sd_mono_ns() : 0;
}

static void tell(struct emu_wire_ep *ep, int fd, enum emu_wire_dir dir, const struct msghdr *mh, ssize_t n,
                 uint64_t t0)
{
    const struct emu_wire_observer *o = atomic_load_explicit(&observer, memory_order_acquire);
    if (__builtin_expect(o == NULL, 1) || n <= 0)
        return;
    /* MSG_TRUNC may report more than the buffers held: what they hold. */
    size_t room = 0;
    for (size_t i = 0; i < (size_t)mh->msg_iovlen; i++)
        room += mh->msg_iov[i].iov_len;
    int saved = errno;
    o->bytes(o->ctx, ep, fd, dir, mh, (size_t)n < room ? (size_t)n : room, t0 ? t0 : sd_mono_ns());
    errno = saved;
}

/* Several iovecs of WIRE_GATHER_MAX bytes or less in all are copied into
 * one buffer on the stack and sent with sendto(2). The kernel's cost per
 * iovec (its import, then one copy and one socket-buffer step each) is
 * what a batch of small frames paid most: three iovecs per frame (header,
 * payload, trailer). Measured on loopback TCP with a draining reader: 32
 * frames of 64 B, 12,960 -> 6,420 cycles a call; 8 frames 7,040 -> 5,130;
 * one 64 B frame 5,240 -> 4,850; one 4 KiB frame about the same either
 * way. The bytes and the partial write the caller sees are the same;
 * larger ones keep sendmsg(2). Not thread-local: a 16 KiB _Thread_local
 * array took the library's TLS out of glibc's static surplus (512 bytes
 * for dlopen'ed objects), and every thread-local access of the provider
 * went through the slow _dl_tlsdesc_dynamic (4% of a polled ping-pong;
 * test/e2e/tls_size.sh guards the size). */
#define WIRE_GATHER_MAX 4096u

static size_t gather(const struct msghdr *mh, unsigned char *buf)
{
    if (mh->msg_iovlen < 2 || mh->msg_controllen != 0)
        return 0;
    size_t total = 0;
    for (size_t i = 0; i < (size_t)mh->msg_iovlen; i++) {
        total += mh->msg_iov[i].iov_len;
        if (total > WIRE_GATHER_MAX)
            return 0;
    }
    unsigned char *p = buf;
    for (size_t i = 0; i < (size_t)mh->msg_iovlen; i++) {
        if (mh->msg_iov[i].iov_len == 0)
            continue;
        memcpy(p, mh->msg_iov[i].iov_base, mh->msg_iov[i].iov_len);
        p += mh->msg_iov[i].iov_len;
    }
    return total;
}

ssize_t emu_wire_send(struct emu_wire_ep *ep, int fd, const struct msghdr *mh, int flags)
{
    uint64_t t0 = began();
    unsigned char buf[WIRE_GATHER_MAX];
    size_t g = gather(mh, buf);
    ssize_t n = g > 0 ? sys_sendto(fd, buf, g, flags, (const struct sockaddr *)mh->msg_name, mh->msg_namelen)
                      : sys_sendmsg(fd, mh, flags);
    tell(ep, fd, EMU_WIRE_TX, mh, n, t0);
    return n;
}

ssize_t emu_wire_recv(struct emu_wire_ep *ep, int fd, struct msghdr *mh, int flags)
{
    uint64_t t0 = began();
    ssize_t n = sys_recvmsg(fd, mh, flags);
    tell(ep, fd, EMU_WIRE_RX, mh, n, t0);
    return n;
}

/* One buffer: send(2)/recv(2) themselves, the syscalls the callers made
 * before they came through here (cheaper than sendmsg/recvmsg: no iovec
 * to import). */
ssize_t emu_wire_send1(struct emu_wire_ep *ep, int fd, const void *buf, size_t len, int flags)
{
    uint64_t t0 = began();
    ssize_t n = sys_sendto(fd, buf, len, flags, NULL, 0);
    if (__builtin_expect(t0 != 0, 0)) {
        struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
        struct msghdr mh = {.msg_iov = &v, .msg_iovlen = 1};
        tell(ep, fd, EMU_WIRE_TX, &mh, n, t0);
    }
    return n;
}

ssize_t emu_wire_recv1(struct emu_wire_ep *ep, int fd, void *buf, size_t len, int flags)
{
    uint64_t t0 = began();
    ssize_t n = sys_recv(fd, buf, len, flags);
    if (__builtin_expect(t0 != 0, 0)) {
        struct iovec v = {.iov_base = buf, .iov_len = len};
        struct msghdr mh = {.msg_iov = &v, .msg_iovlen = 1};
        tell(ep, fd, EMU_WIRE_RX, &mh, n, t0);
    }
    return n;
}
