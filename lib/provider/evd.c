/* softdat EVD: the object (create/query/free). Event delivery, waiting and
 * CNO notification are added by the data-path issue; the hooks they need are
 * the sd_evd fields and the teardown/release callbacks below. */
#include "lib/provider/evd.h"

#include "emu/log.h"
#include "lib/provider/ia.h"

static void evd_teardown(struct sd_handle *h)
{
    struct sd_evd *evd = (struct sd_evd *)h;
    /* Data path: wake waiters with DAT_ABORT, detach from streams. */
    if (evd->cno != NULL) {
        sd_handle_dep_put(evd->cno);
        sd_handle_put(evd->cno);
        evd->cno = NULL;
    }
}

static void evd_release(struct sd_handle *h)
{
    (void)h; /* Data path: free the event ring. */
}

static const struct sd_handle_ops evd_ops = {
    .type = DAT_HANDLE_TYPE_EVD,
    .name = "evd",
    .size = sizeof(struct sd_evd),
    .phase = SD_PHASE_EVD,
    .teardown = evd_teardown,
    .release = evd_release,
};

DAT_RETURN sd_evd_create_obj(struct sd_ia *ia, DAT_COUNT min_qlen, struct sd_handle *cno, DAT_EVD_FLAGS flags,
                             struct sd_evd **out)
{
    if (min_qlen < 0 || min_qlen > SD_MAX_EVD_QLEN)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    if (flags == 0 || (flags & ~(DAT_EVD_FLAGS)SD_EVD_VALID_FLAGS) != 0)
        return SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG4);
    struct sd_evd *evd = (struct sd_evd *)sd_handle_alloc(&evd_ops, ia);
    if (evd == NULL)
        return SD_RET(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
    evd->flags = flags;
    evd->qlen = min_qlen;
    evd->state = DAT_EVD_STATE_ENABLED | DAT_EVD_STATE_WAITABLE | DAT_EVD_STATE_CONFIG_NOTIFY;
    if (cno != NULL) {
        if (!sd_handle_dep_get(cno)) {
            sd_handle_discard(&evd->h);
            return SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
        }
        sd_handle_ref(cno);
        evd->cno = cno;
    }
    DAT_RETURN rc = sd_handle_publish(&evd->h);
    if (rc != DAT_SUCCESS) {
        evd_teardown(&evd->h);
        sd_handle_discard(&evd->h);
        return rc;
    }
    *out = evd;
    return DAT_SUCCESS;
}

static DAT_RETURN sd_evd_create(DAT_IA_HANDLE ia_handle, DAT_COUNT min_qlen, DAT_CNO_HANDLE cno_handle,
                                DAT_EVD_FLAGS flags, DAT_EVD_HANDLE *evd_handle)
{
    struct sd_ia *ia;
    DAT_RETURN rc = sd_ia_get(ia_handle, &ia);
    if (rc != DAT_SUCCESS)
        return rc;
    struct sd_handle *cno = NULL;
    if (evd_handle == NULL) {
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG5);
        goto out;
    }
    if (cno_handle != DAT_HANDLE_NULL) {
        rc = sd_handle_get(cno_handle, DAT_HANDLE_TYPE_CNO, DAT_INVALID_HANDLE_CNO, &cno);
        if (rc != DAT_SUCCESS)
            goto out;
        if (cno->ia != ia) { /* a CNO of another IA (L3326) */
            rc = SD_RET(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_CNO);
            goto out;
        }
    }
    struct sd_evd *evd;
    rc = sd_evd_create_obj(ia, min_qlen, cno, flags, &evd);
    if (rc == DAT_SUCCESS)
        *evd_handle = (DAT_EVD_HANDLE)evd;
out:
    sd_handle_put(cno);
    sd_handle_put(&ia->h);
    return rc;
}

static DAT_RETURN sd_evd_query(DAT_EVD_HANDLE evd_handle, DAT_EVD_PARAM_MASK mask, DAT_EVD_PARAM *param)
{
    struct sd_evd *evd;
    DAT_RETURN rc = sd_evd_get(evd_handle, DAT_INVALID_HANDLE_EVD_REQUEST, &evd);
    if (rc != DAT_SUCCESS)
        return rc;
    if ((mask & ~(DAT_EVD_PARAM_MASK)DAT_EVD_FIELD_ALL) != 0)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG2);
    else if (param == NULL)
        rc = SD_RET(DAT_INVALID_PARAMETER, DAT_INVALID_ARG3);
    else {
        param->ia_handle = sd_ia_consumer_handle(evd->h.ia);
        param->evd_qlen = evd->qlen;
        param->evd_state = evd->state;
        param->cno_handle = (DAT_CNO_HANDLE)evd->cno;
        param->evd_flags = evd->flags;
    }
    sd_handle_put(&evd->h);
    return rc;
}

static DAT_RETURN sd_evd_free(DAT_EVD_HANDLE evd_handle)
{
    struct sd_evd *evd;
    DAT_RETURN rc = sd_evd_get(evd_handle, DAT_INVALID_HANDLE_EVD_REQUEST, &evd);
    if (rc != DAT_SUCCESS)
        return rc;
    /* Deps count the EPs/SPs whose streams feed this EVD (L3375, L3384). */
    if (!sd_handle_try_retire(&evd->h))
        rc = SD_RET(DAT_INVALID_STATE, DAT_INVALID_STATE_EVD_IN_USE);
    else
        rc = sd_handle_destroy(&evd->h, DAT_INVALID_HANDLE_EVD_REQUEST);
    sd_handle_put(&evd->h);
    return rc;
}

void sd_evd_fill_table(DAT_PROVIDER *p)
{
    p->evd_create_func = sd_evd_create;
    p->evd_query_func = sd_evd_query;
    p->evd_free_func = sd_evd_free;
}
