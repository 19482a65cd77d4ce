/* Provider-level trace records (docs/trace.md): the DAT calls (wrapped at
 * the function table, trace_calls.c), posts, events as delivered to an
 * EVD and connection-state changes. Every entry point here is called
 * only after SD_TRACE_ON(); with the trace off none of this runs. */
#ifndef SOFTDAT_PROVIDER_TRACE_REC_H
#define SOFTDAT_PROVIDER_TRACE_REC_H

#include <dat2/udat.h>
#include <dat2/dat_registry.h>

#include "emu/trace.h"
#include "lib/provider/evq.h"

struct sd_handle;
struct sd_evd;
struct sd_ep;
struct sd_ia;

/* The IA context of an object (its IA's id and open time). */
void sd_trace_ctx_of(const struct sd_handle *h, struct sd_trace_ctx *ctx);
/* "obj":"ep3" style field naming a live object (h may be NULL: no field). */
void sd_trace_kv_obj(struct sd_trace_rec *r, const char *key, const struct sd_handle *h);
/* The same for a raw handle value the consumer passed: looked up first
 * (garbage and stale handles are named "invalid"); DAT_HANDLE_NULL -> null. */
void sd_trace_kv_raw_handle(struct sd_trace_rec *r, const char *key, DAT_HANDLE raw);
/* "rc":"DAT_INVALID_STATE","rc_hex":"0x70000"... */
void sd_trace_kv_rc(struct sd_trace_rec *r, DAT_RETURN rc);
const char *sd_trace_event_name(DAT_EVENT_NUMBER num);
const char *sd_trace_ep_state_name(DAT_EP_STATE s);
const char *sd_trace_dto_status_name(DAT_DTO_COMPLETION_STATUS s);

/* An event offered to an EVD; rc is what the queue answered (DAT_SUCCESS
 * or DAT_QUEUE_FULL: the event was lost). */
void sd_trace_event(struct sd_evd *evd, const DAT_EVENT *ev, enum sd_evq_kind kind, DAT_RETURN rc);
/* An EP's state changed (caller holds ep->lock). */
void sd_trace_ep_state(const struct sd_ep *ep, DAT_EP_STATE from, DAT_EP_STATE to);
/* dat_ia_open through record slot `slot` (trampolines in provider.c). */
void sd_trace_ia_open(const char *name, DAT_RETURN rc, DAT_IA_HANDLE ia);

/* Replace every entry point of a filled table by its tracing wrapper
 * (trace_calls.c). Called by fill_table only when the trace is on. */
void sd_trace_wrap_table(DAT_PROVIDER *p);

#endif
