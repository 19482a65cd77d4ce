/* softdat CNO: handle, argument checks and IA/EVD references around the CNO
 * wait core (cnoq.c). Spec lines (Lnnnn): DAT 2.0 text; semantics:
 * docs/events.md §3. */
#include "lib/provider/cno.h"

#include "emu/log.h"
#include "lib/provider/ia.h"

static void cno_teardown(struct sd_handle *h)
{
    struct sd_cno *cno = (struct sd_cno *)h;
    /* IA destroyed (or CNO freed): every waiter and the agent get a NULL
     * EVD (L3135). dat_cno_free itself refuses while a thread is blocked. */
    if (cno->c_inited)
        sd_cnoq_wake_all(&cno->c, SD_RET(DAT_ABORT, 0));
}

static void cno_release(struct sd_handle *h)
{
    struct sd_cno *cno = (struct sd_cno *)h;
    if (!cno->c_inited)
        return;
    /* No reference is left, so nobody waits; fini waits for triggers in
     * flight from EVDs that detached, then closes the fd if still ours. */
    DAT_RETURN rc = sd_cnoq_fini(&cno->c);
    if (rc != DAT_SUCCESS)
        SD_ERR("cno", "fini: 0x%x", (unsigned)rc);
    cno->c_inited = false;
}

static const struct sd_handle_ops cno_ops = {
    .type = DAT_HANDLE_TYPE_CNO,
    .name = "cno",
    .size = sizeof(struct sd_cno),
    .phase = SD_PHASE_CNO,
    .teardown = cno_teardown,
    .release = cno_release,
};

/* Shared head of both creates: the handle argument (ARG3) and the object. */
static DAT_RETURN cno_new(struct sd_ia *ia, DAT_CNO_HANDLE *cno_handle, struct sd_cno **out)
{
    if (cno_handle == NULL)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    *out = (struct sd_cno *)sd_handle_alloc(&cno_ops, ia);
    return *out != NULL ? DAT_SUCCESS : SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
}

/* Shared tail of both creates: the core is initialised by init(). */
static DAT_RETURN cno_publish(struct sd_cno *cno, DAT_CNO_HANDLE *cno_handle)
{
    DAT_RETURN rc = sd_handle_publish(&cno->h);
    if (rc != DAT_SUCCESS) {
        sd_handle_discard(&cno->h);
        return rc;
    }
    *cno_handle = (DAT_CNO_HANDLE)cno;
    return DAT_SUCCESS;
}

static DAT_RETURN sd_cno_create(DAT_IA_HANDLE ia_handle, DAT_OS_WAIT_PROXY_AGENT agent, DAT_CNO_HANDLE *cno_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_cno *cno;
    if ((rc = cno_new(ia, cno_handle, &cno)) != DAT_SUCCESS)
        goto out;
    rc = sd_cnoq_init(&cno->c, agent);
    if (rc != DAT_SUCCESS) {
        sd_handle_discard(&cno->h);
        rc = DAT_GET_TYPE(rc) == DAT_INVALID_PARAMETER ? SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2)
                                                       : SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    cno->c_inited = true;
    rc = cno_publish(cno, cno_handle);
out:
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_cno_fd_create(DAT_IA_HANDLE ia_handle, DAT_FD *os_fd, DAT_CNO_HANDLE *cno_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    if (os_fd == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
        goto out;
    }
    struct sd_cno *cno;
    if ((rc = cno_new(ia, cno_handle, &cno)) != DAT_SUCCESS)
        goto out;
    int fd = -1;
    rc = sd_cnoq_init_fd(&cno->c, &fd);
    if (rc != DAT_SUCCESS) {
        sd_handle_discard(&cno->h);
        rc = SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        goto out;
    }
    cno->c_inited = true;
    rc = cno_publish(cno, cno_handle); /* on failure release closes the fd */
    if (rc == DAT_SUCCESS)
        *os_fd = (DAT_FD)fd;
out:
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_cno_modify_agent(DAT_CNO_HANDLE cno_handle, DAT_OS_WAIT_PROXY_AGENT agent)
{
    struct sd_cno *cno;
    DAT_RETURN rc = sd_cno_get(cno_handle, &cno);
    if (rc != DAT_SUCCESS)
        return rc;
    rc = sd_cnoq_set_agent(&cno->c, agent); /* half-NULL agent or fd CNO: ARG2 */
    sd_handle_put(&cno->h);
    return rc;
}

static DAT_RETURN sd_cno_query(DAT_CNO_HANDLE cno_handle, DAT_CNO_PARAM_MASK mask, DAT_CNO_PARAM *param)
{
    struct sd_cno *cno;
    DAT_RETURN rc = sd_cno_get(cno_handle, &cno);
    if (rc != DAT_SUCCESS)
        return rc;
    /* The mask constants are consecutive numbers (1..4), not bits; any
     * combination of them is at most 7. Everything is always filled. */
    if ((unsigned)mask > 7u)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (param == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else {
        DAT_PROXY_TYPE type;
        DAT_OS_WAIT_PROXY_AGENT agent;
        int fd = -1;
        sd_cnoq_query(&cno->c, &type, &agent, &fd);
        param->ia_handle = sd_ia_consumer_handle(cno->h.ia);
        param->proxy_type = type;
        if (type == DAT_PROXY_TYPE_FD)
            param->proxy.fd = (DAT_FD)fd;
        else if (type == DAT_PROXY_TYPE_AGENT)
            param->proxy.agent = agent;
        else
            param->proxy.agent = DAT_OS_WAIT_PROXY_AGENT_NULL; /* L3239 */
    }
    sd_handle_put(&cno->h);
    return rc;
}

static DAT_RETURN sd_cno_free(DAT_CNO_HANDLE cno_handle)
{
    struct sd_cno *cno;
    DAT_RETURN rc = sd_cno_get(cno_handle, &cno);
    if (rc != DAT_SUCCESS)
        return rc;
    /* L3064-3075: referenced by an EVD, or a thread blocked in it. */
    if (sd_cnoq_waiters(&cno->c) > 0)
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    else if (!sd_handle_try_retire(&cno->h))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE);
    else
        rc = sd_handle_destroy(&cno->h, DAT_INVALID_HANDLE_CNO);
    sd_handle_put(&cno->h);
    return rc;
}

static DAT_RETURN sd_cno_wait(DAT_CNO_HANDLE cno_handle, DAT_TIMEOUT timeout, DAT_EVD_HANDLE *evd_handle)
{
    struct sd_cno *cno;
    DAT_RETURN rc = sd_cno_get(cno_handle, &cno);
    if (rc != DAT_SUCCESS)
        return rc;
    /* DAT_SUCCESS + a hint EVD, DAT_QUEUE_EMPTY on timeout, DAT_ABORT when
     * the IA closes or the CNO's last EVD is freed. */
    rc = sd_cnoq_wait(&cno->c, timeout, evd_handle);
    sd_handle_put(&cno->h);
    return rc;
}

static DAT_RETURN sd_cno_trigger(DAT_CNO_HANDLE cno_handle, DAT_EVD_HANDLE *evd_handle)
{
    struct sd_cno *cno;
    DAT_RETURN rc = sd_cno_get(cno_handle, &cno);
    if (rc != DAT_SUCCESS)
        return rc;
    /* A query despite its name (L3157-3183): the latest triggering EVD. */
    if (evd_handle == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else
        *evd_handle = sd_cnoq_last(&cno->c);
    sd_handle_put(&cno->h);
    return rc;
}

void sd_cno_fill_table(DAT_PROVIDER *p)
{
    p->cno_create_func = sd_cno_create;
    p->cno_modify_agent_func = sd_cno_modify_agent;
    p->cno_query_func = sd_cno_query;
    p->cno_free_func = sd_cno_free;
    p->cno_wait_func = sd_cno_wait;
    p->cno_fd_create_func = sd_cno_fd_create;
    p->cno_trigger_func = sd_cno_trigger;
}
