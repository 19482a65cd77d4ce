/* softdat IA: open, close (abrupt cascade / graceful check) and per-IA
 * object limits. Query lives in ia_attr.c, address resolution in ia_addr.c. */
#include "lib/provider/ia.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "emu/engine.h"
#include "emu/log.h"
#include "emu/mem.h"
#include "lib/provider/evd.h"

unsigned sd_ia_type_limit(uint32_t type, uint32_t *sub)
{
    switch (type) {
    case DAT_HANDLE_TYPE_EP: *sub = DAT_RESOURCE_TEP; return SD_MAX_EPS;
    case DAT_HANDLE_TYPE_EVD: *sub = DAT_RESOURCE_TEVD; return SD_MAX_EVDS;
    case DAT_HANDLE_TYPE_PZ: *sub = DAT_RESOURCE_PROTECTION_DOMAIN; return SD_MAX_PZS;
    case DAT_HANDLE_TYPE_LMR: *sub = DAT_RESOURCE_MEMORY_REGION; return SD_MAX_LMRS;
    case DAT_HANDLE_TYPE_RMR: *sub = DAT_RESOURCE_MEMORY_REGION; return SD_MAX_RMRS;
    case DAT_HANDLE_TYPE_SRQ: *sub = DAT_RESOURCE_SRQ; return SD_MAX_SRQS;
    case DAT_HANDLE_TYPE_CNO: *sub = DAT_RESOURCE_MEMORY; return SD_MAX_CNOS;
    case DAT_HANDLE_TYPE_PSP:
    case DAT_HANDLE_TYPE_RSP:
    case DAT_HANDLE_TYPE_CSP:
    case SD_HTYPE_SSP: *sub = DAT_RESOURCE_MEMORY; return SD_MAX_SPS;
    case DAT_HANDLE_TYPE_CR: *sub = DAT_RESOURCE_MEMORY; return SD_MAX_CRS;
    default: *sub = DAT_RESOURCE_MEMORY; return 0;
    }
}

/* Abrupt close (L2142-2150): destroy every child, dependants first. Also
 * the tail of a graceful close, where only the async EVD can be left. */
static void ia_teardown(struct sd_handle *h)
{
    struct sd_ia *ia = (struct sd_ia *)h;
    pthread_mutex_lock(&ia->lock);
    ia->closing = true; /* no child can be published any more */
    pthread_mutex_unlock(&ia->lock);
    unsigned n = 0;
    for (int phase = 0; phase < SD_PHASE_COUNT; phase++) {
        struct sd_handle *child;
        while ((child = sd_handle_take_child(ia, (enum sd_phase)phase)) != NULL) {
            SD_DBG("ia", "close: destroying %s %p", child->ops->name, (void *)child);
            sd_handle_finish_child(child);
            n++;
        }
    }
    if (n)
        SD_DBG("ia", "close of %s destroyed %u objects", ia->rec->info.ia_name, n);
    /* sd_ia_post_async reads async_evd under ia->lock. */
    pthread_mutex_lock(&ia->lock);
    struct sd_evd *async = ia->async_evd;
    ia->async_evd = NULL;
    pthread_mutex_unlock(&ia->lock);
    if (async != NULL)
        sd_handle_put(&async->h);
    /* Children are gone, so nothing queues engine work any more. */
    if (ia->engine != NULL) {
        int e = emu_engine_destroy(ia->engine);
        if (e != 0)
            SD_ERR("ia", "engine destroy failed (%d): IA closed from its engine thread?", e);
        else
            ia->engine = NULL;
    }
}

static void ia_release(struct sd_handle *h)
{
    struct sd_ia *ia = (struct sd_ia *)h;
    if (ia->engine != NULL) /* never published, or teardown could not */
        emu_engine_destroy(ia->engine);
    /* Last reference: no create can still be registering into the table. */
    emu_mem_table_destroy(ia->mem);
    pthread_mutex_destroy(&ia->lock);
}

static const struct sd_handle_ops ia_ops = {
    .type = DAT_HANDLE_TYPE_IA,
    .name = "ia",
    .size = sizeof(struct sd_ia),
    .phase = SD_PHASE_COUNT, /* never a child */
    .teardown = ia_teardown,
    .release = ia_release,
};

/* The engine's event base needs a handful of descriptors (epoll, wakeup
 * pipe, signal socketpair, timer), and libevent exits the process when it
 * cannot get the signal socketpair. So check first that descriptors are
 * there and answer DAT_INSUFFICIENT_RESOURCES (L2089-2093) instead. A
 * thread taking descriptors at the same moment can still beat us: this
 * narrows the window, only emu can close it. */
#define SD_IA_ENGINE_FDS 8
static bool fd_headroom(void)
{
    int fds[SD_IA_ENGINE_FDS];
    int n = 0;
    while (n < SD_IA_ENGINE_FDS && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        n++;
    bool ok = n == SD_IA_ENGINE_FDS;
    while (n > 0)
        close(fds[--n]);
    return ok;
}

/* Bind the async EVD argument of dat_ia_open (L2067-2077). */
static DAT_RETURN ia_bind_async_evd(struct sd_ia *ia, DAT_COUNT qlen, DAT_EVD_HANDLE *async_evd_handle)
{
    DAT_EVD_HANDLE in = *async_evd_handle;
    if (in == DAT_HANDLE_NULL) {
        struct sd_evd *evd;
        DAT_COUNT len = qlen < SD_ASYNC_EVD_MIN_QLEN ? SD_ASYNC_EVD_MIN_QLEN : qlen;
        DAT_RETURN rc = sd_evd_create_obj(ia, len, NULL, DAT_EVD_ASYNC_FLAG, &evd);
        if (rc != DAT_SUCCESS)
            return rc;
        sd_handle_ref(&evd->h);
        ia->async_evd = evd;
        ia->async_evd_owned = true;
        *async_evd_handle = (DAT_EVD_HANDLE)evd;
        return DAT_SUCCESS;
    }
    if (in == DAT_EVD_ASYNC_EXISTS) {
        ia->async_exists = true;
        return DAT_SUCCESS;
    }
    /* A consumer's EVD: must be a live async EVD of this provider. It
     * belongs to another IA, so it is referenced, not owned. */
    struct sd_evd *evd;
    DAT_RETURN rc = sd_evd_get(in, DAT_INVALID_HANDLE_EVD_ASYNC, &evd);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((evd->flags & DAT_EVD_ASYNC_FLAG) == 0) {
        sd_handle_put(&evd->h);
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
    }
    ia->async_evd = evd;
    return DAT_SUCCESS;
}

DAT_RETURN sd_ia_open(struct sd_provider_rec *rec, const DAT_NAME_PTR name, DAT_COUNT async_evd_qlen,
                      DAT_EVD_HANDLE *async_evd_handle, DAT_IA_HANDLE *ia_handle)
{
    if (name == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    if (async_evd_handle == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    if (ia_handle == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    if (strncmp(name, rec->info.ia_name, DAT_NAME_MAX_LENGTH) != 0)
        return SD_RET(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
    if (*async_evd_handle == DAT_HANDLE_NULL && (async_evd_qlen < 0 || async_evd_qlen > SD_MAX_EVD_QLEN))
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);

    struct sd_ia *ia = (struct sd_ia *)sd_handle_alloc(&ia_ops, NULL);
    if (ia == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    ia->h.provider = &rec->table;
    ia->h.ia = ia;
    ia->t0_ns = sd_mono_ns();
    ia->rec = rec;
    pthread_mutex_init(&ia->lock, NULL);
    ia->children.prev = ia->children.next = &ia->children;

    /* The IA name is the only thing the consumer gave us, so a record whose
     * ia_params names nothing usable is an invalid name for this open. */
    sd_ia_semantics(rec->info.ia_name, rec->ia_params, &ia->sem);
    int res = sd_ia_resolve_address(rec->ia_params, &ia->addr, &ia->addr_len, ia->ifname);
    if (res == -2) { /* no descriptor or memory to look the address up */
        sd_handle_discard(&ia->h);
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    if (res != 0) {
        SD_ERR("ia", "%s: ia_params \"%s\" does not name a usable interface or local address",
               rec->info.ia_name, rec->ia_params);
        sd_handle_discard(&ia->h);
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG1);
    }
    struct emu_mem_limits lim = {
        .max_pzs = SD_MAX_PZS, .max_regions = SD_MAX_LMRS, .max_windows = SD_MAX_RMRS, .first_index = 0};
    enum emu_mem_status mst = emu_mem_table_create(&lim, &ia->mem);
    if (mst != EMU_MEM_OK) {
        SD_ERR("ia", "%s: memory table: %s", rec->info.ia_name, emu_mem_status_str(mst));
        sd_handle_discard(&ia->h);
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    if (!fd_headroom()) {
        SD_ERR("ia", "%s: out of file descriptors", rec->info.ia_name);
        sd_handle_discard(&ia->h);
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    int e = emu_engine_create("softdat-ia", &ia->engine);
    if (e != 0) {
        SD_ERR("ia", "%s: engine thread: %d", rec->info.ia_name, e);
        ia->engine = NULL;
        sd_handle_discard(&ia->h);
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    }
    /* Frame and memory-check records of this IA's connections name it. */
    emu_engine_set_trace(ia->engine, &(struct emu_engine_trace){ia->h.id, ia->t0_ns});
    DAT_RETURN rc = sd_handle_publish(&ia->h);
    if (rc != DAT_SUCCESS) {
        sd_handle_discard(&ia->h);
        return rc;
    }
    rc = ia_bind_async_evd(ia, async_evd_qlen, async_evd_handle);
    if (rc != DAT_SUCCESS) {
        sd_handle_destroy(&ia->h, DAT_INVALID_HANDLE_IA);
        return rc;
    }
    SD_INFO("ia", "opened %s on %s", rec->info.ia_name, ia->ifname[0] ? ia->ifname : rec->ia_params);
    *ia_handle = (DAT_IA_HANDLE)ia;
    return DAT_SUCCESS;
}

DAT_RETURN sd_ia_close(DAT_IA_HANDLE ia_handle, DAT_CLOSE_FLAGS flags)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    if (flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG) {
        sd_handle_put(&ia->h);
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    }
    pthread_mutex_lock(&ia->lock);
    if (ia->closing) { /* another thread is closing it */
        pthread_mutex_unlock(&ia->lock);
        sd_handle_put(&ia->h);
        return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_IA);
    }
    if (flags == DAT_CLOSE_GRACEFUL_FLAG) {
        /* Everything the consumer created must be gone; the async EVD we
         * created is ours to destroy (L2152-2163). It is on the child list
         * exactly while it is live, and both change under ia->lock. */
        unsigned left = ia->nchildren;
        if (ia->async_evd_owned && ia->async_evd != NULL && sd_handle_alive(&ia->async_evd->h))
            left--;
        if (left > 0) {
            pthread_mutex_unlock(&ia->lock);
            sd_handle_put(&ia->h);
            return SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_IA_IN_USE);
        }
    }
    ia->closing = true;
    pthread_mutex_unlock(&ia->lock);
    rc = sd_handle_destroy(&ia->h, DAT_INVALID_HANDLE_IA);
    sd_handle_put(&ia->h);
    return rc;
}

void sd_ia_fill_table(DAT_PROVIDER *p)
{
    p->ia_query_func = sd_ia_query;
    p->ia_close_func = sd_ia_close;
}
